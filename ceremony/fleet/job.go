package fleet

import (
	"path/filepath"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// The fixed names and paths of the fleet's Job (docs/fleet.md §9).
const (
	// JobContainer is the name of the pod's one container, which the
	// podFailurePolicy's exit-code rules name.
	JobContainer = "apply"
	// JobServiceAccount runs the pods: it is bound to nothing, and its
	// token is not mounted — the pods read only their volumes and talk
	// to the targets with the Secret's kubeconfigs.
	JobServiceAccount = "ql3-fleet"
	// JobDriverRole is the Role of whoever creates and watches the Jobs.
	JobDriverRole = "ql3-fleet-driver"
	// DefaultReceiptsClaim is the claim the pods write receipts to.
	DefaultReceiptsClaim = "ql3-fleet-receipts"
	// DefaultBackoffLimitPerIndex is the retries of one index after an
	// unknown outcome (exit 4, or a crash).
	DefaultBackoffLimitPerIndex = 2
	// JobUser is the image's user (and the pods' fsGroup).
	JobUser = 65532
	// The pod's mount points.
	jobFilesDir      = "/ql3"
	jobKubeconfigDir = "/kubeconfigs"
	jobReceiptsDir   = "/receipts"
)

// The annotations of the Job: what it runs, for a driver that waits on it.
const (
	AnnotationPlan  = "ql3.io/fleet-plan"
	AnnotationWave  = "ql3.io/fleet-wave"
	AnnotationWaveD = "ql3.io/fleet-wave-digest"
)

// The podFailurePolicy's exit classes: a definite refusal fails the index
// at once; an unknown outcome is retried.
var (
	jobFailIndexExits = []int32{2, 3, 5}
	jobRetryExits     = []int32{4}
)

// JobRequest is `fleet job FILE --wave W`: the wave's Indexed Job for a
// management cluster's namespace.
type JobRequest struct {
	FleetPath string // the fleet file, as given
	Plan      *plan.Plan
	PlanDir   string // the plan record's directory
	Wave      string
	Namespace string // the management namespace
	Image     string // the project's image, pinned by digest
	// Name names the Job and its ConfigMap (default ql3-fleet-<wave>);
	// the Secret of kubeconfigs is Name-kubeconfigs.
	Name                 string
	ReceiptsClaim        string // default DefaultReceiptsClaim
	BackoffLimitPerIndex int32  // default DefaultBackoffLimitPerIndex; -1 is 0
}

// JobObjects are the printed objects of a wave: the ConfigMap of its
// files and its Job. The Secret (SecretName) holds credentials and is not
// printed: one key per target of the wave, named after it.
type JobObjects struct {
	ConfigMap  *corev1.ConfigMap
	Job        *batchv1.Job
	SecretName string
	Targets    []string // the wave's targets, index i = Targets[i]
}

// Job is the Indexed Job that runs wave req.Wave of the plan on the
// Kubernetes Job controller (docs/fleet.md §9): index i is the wave's
// i-th target, each pod running `fleet apply --wave W --index i` —
// ApplyOne, the fleet's own per-target apply — in the project's image.
func Job(f *fleetfile.Fleet, req JobRequest) (*JobObjects, error) {
	p := req.Plan
	if err := p.Matches(f); err != nil {
		return nil, err
	}
	var w *plan.Wave
	for i := range p.Waves {
		if p.Waves[i].Name == req.Wave {
			w = &p.Waves[i]
		}
	}
	if w == nil {
		return nil, fail.Errorf(fail.Invalid, "--wave %q: the plan has no such wave", req.Wave)
	}
	if err := req.defaults(); err != nil {
		return nil, err
	}
	files, err := jobFiles(f, req.FleetPath, p, req.PlanDir, *w)
	if err != nil {
		return nil, err
	}
	wd, err := w.Digest()
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "%w", err)
	}
	labels := map[string]string{"app.kubernetes.io/name": "kubectl-ql3-fleet", "app.kubernetes.io/managed-by": "kubectl-ql3"}
	cm, items, err := jobConfigMap(req.Name, req.Namespace, labels, files)
	if err != nil {
		return nil, err
	}
	objs := &JobObjects{ConfigMap: cm, SecretName: req.Name + "-kubeconfigs"}
	for _, t := range w.Targets {
		objs.Targets = append(objs.Targets, t.Name)
	}
	objs.Job = req.job(*w, labels, items, objs.SecretName)
	objs.Job.Annotations = map[string]string{AnnotationPlan: p.SelfDigest, AnnotationWave: w.Name, AnnotationWaveD: wd}
	return objs, nil
}

// defaults fills and checks the request's names.
func (req *JobRequest) defaults() error {
	if req.Name == "" {
		req.Name = "ql3-fleet-" + req.Wave
	}
	if req.ReceiptsClaim == "" {
		req.ReceiptsClaim = DefaultReceiptsClaim
	}
	if req.BackoffLimitPerIndex == 0 {
		req.BackoffLimitPerIndex = DefaultBackoffLimitPerIndex
	} else if req.BackoffLimitPerIndex < 0 {
		req.BackoffLimitPerIndex = 0
	}
	for _, fv := range [][2]string{{"--name", req.Name}, {"--receipts-claim", req.ReceiptsClaim}, {"--namespace", req.Namespace}} {
		if errs := validation.IsDNS1123Label(fv[1]); len(errs) > 0 {
			hint := ""
			if fv[0] == "--name" {
				hint = " (the default is ql3-fleet-<wave>: a wave name over 53 characters needs --name)"
			}
			return fail.Errorf(fail.Invalid, "%s %q: %s%s", fv[0], fv[1], errs[0], hint)
		}
	}
	return CheckImage(req.Image)
}

// CheckImage checks --image, the project's image every pod of a wave runs
// with the wave's kubeconfigs: required, and pinned by digest (a tag is
// whatever its registry serves today).
func CheckImage(image string) error {
	switch {
	case image == "":
		return fail.Errorf(fail.Invalid, "--image: the project's image is required, pinned by digest (REGISTRY/kubectl-ql3:vX.Y.Z@sha256:…)")
	case !inventory.IsPinnedImage(image):
		return fail.Errorf(fail.Invalid, "--image %q is not pinned by digest: give REGISTRY/kubectl-ql3:vX.Y.Z@sha256:<64 lowercase hex>", image)
	}
	return nil
}

// job is the Job itself.
func (req *JobRequest) job(w plan.Wave, labels map[string]string, items []corev1.KeyToPath, secret string) *batchv1.Job {
	n := int32(len(w.Targets))
	parallelism, maxFailed := min(int32(w.MaxParallel), n), min(int32(w.MaxFailures), n)
	indexed := batchv1.IndexedCompletion
	fleetFile := jobFilesDir + "/fleet/" + filepath.Base(req.FleetPath)
	args := []string{"fleet", "apply", fleetFile, "--plan", jobFilesDir + "/plan/" + PlanFile, "--plan-digest", req.Plan.SelfDigest,
		"--wave", w.Name, "--index", "$(JOB_COMPLETION_INDEX)", "--kubeconfig-dir", jobKubeconfigDir, "--receipts-dir", jobReceiptsDir}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode:       &indexed,
			Completions:          &n,
			Parallelism:          &parallelism,
			BackoffLimitPerIndex: &req.BackoffLimitPerIndex,
			MaxFailedIndexes:     &maxFailed,
			PodFailurePolicy:     jobPodFailurePolicy(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       req.podSpec(args, items, secret),
			},
		},
	}
}

// jobPodFailurePolicy: a disruption (eviction, preemption) is not the
// target's failure; a definite refusal fails the index without a retry;
// an unknown outcome counts against backoffLimitPerIndex (a retry
// resumes). Any other failure (exit 1, a crash) counts, as by default.
func jobPodFailurePolicy() *batchv1.PodFailurePolicy {
	c := JobContainer
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
		{Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: &c, Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: jobFailIndexExits}},
		{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: &c, Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: jobRetryExits}},
	}}
}

// podSpec is the pod of every index: the image's user, no API token, a
// read-only root, the files, the kubeconfigs and the receipts.
func (req *JobRequest) podSpec(args []string, items []corev1.KeyToPath, secret string) corev1.PodSpec {
	no, yes := false, true
	user := int64(JobUser)
	filesMode, secretMode := int32(0o444), int32(0o440)
	return corev1.PodSpec{
		ServiceAccountName:           JobServiceAccount,
		AutomountServiceAccountToken: &no,
		EnableServiceLinks:           &no,
		RestartPolicy:                corev1.RestartPolicyNever,
		SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &user, RunAsGroup: &user, FSGroup: &user},
		Containers: []corev1.Container{{
			Name: JobContainer, Image: req.Image, Args: args,
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "files", MountPath: jobFilesDir, ReadOnly: true},
				{Name: "kubeconfigs", MountPath: jobKubeconfigDir, ReadOnly: true},
				{Name: "receipts", MountPath: jobReceiptsDir},
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "files", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: req.Name}, Items: items, DefaultMode: &filesMode}}},
			{Name: "kubeconfigs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: secret, DefaultMode: &secretMode}}},
			{Name: "receipts", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: req.ReceiptsClaim}}},
		},
	}
}

// JobRBAC is what the management namespace needs (docs/fleet.md §9.3):
// the pods' ServiceAccount, bound to nothing (the pods need no right in
// the management cluster: they read their volumes), and the driver's Role
// — to create, watch and delete the waves' Jobs, ConfigMaps and Secrets
// and read their pods and logs — bound to bindUser when it is given.
// Nothing cluster-wide.
func JobRBAC(ns, bindUser string) ([]any, error) {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fail.Errorf(fail.Invalid, "--namespace %q: %s", ns, errs[0])
	}
	no := false
	labels := map[string]string{"app.kubernetes.io/name": "kubectl-ql3-fleet", "app.kubernetes.io/managed-by": "kubectl-ql3"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	objs := []any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(JobServiceAccount), AutomountServiceAccountToken: &no},
		&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta(JobDriverRole),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "create", "patch", "delete"}},
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
			}},
	}
	if bindUser != "" {
		objs = append(objs, &rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: meta(JobDriverRole),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: JobDriverRole},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: bindUser}}})
	}
	return objs, nil
}
