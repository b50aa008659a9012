package testkit

import "fmt"

// WorkloadDeployment is the YAML of a Deployment of replicas pods of the
// test node's workload image, labelled with role (a lock binds every
// production role to a workload), with an exec readiness probe every
// second and no image pull: the Deployment the node tests and the node
// bench deploy.
func WorkloadDeployment(name, role string, replicas int, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels: {qinglong.io/role: %[2]s}
spec:
  replicas: %[3]d
  selector:
    matchLabels: {app.kubernetes.io/name: %[1]s}
  template:
    metadata:
      labels: {app.kubernetes.io/name: %[1]s}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: %[1]s
        image: %[4]s
        imagePullPolicy: Never
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          exec: {command: [/workload, -get, "http://127.0.0.1:8080/healthz"]}
          periodSeconds: 1
`, name, role, replicas, image)
}
