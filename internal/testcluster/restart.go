package testcluster

import (
	"errors"
	"time"
)

// RestartAPIServer stops kube-apiserver and starts it again on the same port.
func (cp *ControlPlane) RestartAPIServer() error {
	if err := cp.StopAPIServer(); err != nil {
		return err
	}
	return cp.StartAPIServer()
}

// StopAPIServer stops kube-apiserver: the cluster answers nothing until
// StartAPIServer (etcd keeps its state).
func (cp *ControlPlane) StopAPIServer() error {
	cp.mu.Lock()
	var api *proc
	for _, p := range cp.procs {
		if p.name == "kube-apiserver" {
			api = p
		}
	}
	cp.mu.Unlock()
	if api == nil {
		return errors.New("kube-apiserver is not running")
	}
	cp.stopProc(api)
	cp.mu.Lock()
	cp.stoppedAPI = api
	cp.mu.Unlock()
	return nil
}

// StartAPIServer starts the kube-apiserver StopAPIServer stopped, with the
// same arguments and port, and waits until it is ready.
func (cp *ControlPlane) StartAPIServer() error {
	cp.mu.Lock()
	api := cp.stoppedAPI
	cp.stoppedAPI = nil
	cp.mu.Unlock()
	if api == nil {
		return errors.New("kube-apiserver was not stopped")
	}
	args := api.cmd.Args[1:]
	p, err := cp.run("kube-apiserver", api.cmd.Path, args...)
	if err != nil {
		return err
	}
	tr, err := cp.caTransport()
	if err != nil {
		return err
	}
	if err := waitHTTP(cp.URL+"/livez", tr, 90*time.Second, p); err != nil {
		return err
	}
	if err := cp.waitReady(90 * time.Second); err != nil {
		return err
	}
	if cp.oidc != nil {
		return cp.waitOIDC(60 * time.Second)
	}
	return nil
}

// RestartEtcd stops etcd and starts it again on the same ports and data
// directory, then waits until kube-apiserver serves again.
func (cp *ControlPlane) RestartEtcd() error {
	cp.mu.Lock()
	var etcd *proc
	for _, p := range cp.procs {
		if p.name == "etcd" {
			etcd = p
		}
	}
	cp.mu.Unlock()
	if etcd == nil {
		return errors.New("etcd is not running")
	}
	cp.stopProc(etcd)
	p, err := cp.run("etcd", etcd.cmd.Path, etcd.cmd.Args[1:]...)
	if err != nil {
		return err
	}
	// Keep the start order (etcd first) so Stop ends it last.
	cp.mu.Lock()
	for i, q := range cp.procs {
		if q == p {
			cp.procs = append([]*proc{p}, append(cp.procs[:i:i], cp.procs[i+1:]...)...)
			break
		}
	}
	cp.mu.Unlock()
	if err := waitHTTP(cp.etcdURL+"/health", nil, 30*time.Second, p); err != nil {
		return err
	}
	return cp.waitReady(90 * time.Second)
}
