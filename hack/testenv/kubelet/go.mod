// Wrapper module of the test world's kubelet port-forward endpoint (main.go), built with the
// kubelet's streaming code of the same Kubernetes release as the test control plane.
module capmaas.invalid/testenv/kubelet

go 1.26.0

require k8s.io/cri-streaming v0.36.3

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/moby/spdystream v0.5.1 // indirect
	golang.org/x/net v0.49.0 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/streaming v0.36.3 // indirect
	k8s.io/utils v0.0.0-20260210185600-b8788abfbbc2 // indirect
)
