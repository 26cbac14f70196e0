// kubelet-portforward serves the one kubelet endpoint the test world's workload control planes
// need beyond what the stand-in in e2e/src writes through the API: pod port-forwarding, which
// KubeadmControlPlane uses to reach each control-plane node's etcd member and API server. The
// streams are handled by the kubelet's own code (k8s.io/cri-streaming, as the kubelet's server
// does); a stream for port P of any pod on this node is connected to <node address>:P, since the
// control-plane pods kubeadm creates use the host network.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
)

// hostNetwork forwards a stream to a port of the node's own address.
type hostNetwork struct{ address string }

func (h hostNetwork) PortForward(ctx context.Context, pod string, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(h.address, fmt.Sprint(port)))
	if err != nil {
		return fmt.Errorf("pod %s port %d: %w", pod, port, err)
	}
	defer conn.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(conn, stream)
		if c, ok := conn.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
	}()
	_, _ = io.Copy(stream, conn)
	wg.Wait()
	return nil
}

// selfSigned is the kubelet's self-signed serving certificate (kube-apiserver does not verify
// kubelets' serving certificates unless --kubelet-certificate-authority is set).
func selfSigned(address string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	template := x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: address + "@kubelet"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(address)},
	}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func main() {
	address := flag.String("address", "", "the node's address: listened on, and where its pods' ports are")
	port := flag.Int("port", 10250, "the kubelet port")
	flag.Parse()
	if net.ParseIP(*address) == nil {
		log.Fatalf("--address %q is not an IP address", *address)
	}
	cert, err := selfSigned(*address)
	if err != nil {
		log.Fatalf("serving certificate: %v", err)
	}
	forwarder := hostNetwork{address: *address}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	// /portForward/{namespace}/{pod}[/{uid}], GET or POST, as the kubelet's server routes it.
	mux.HandleFunc("/portForward/", func(w http.ResponseWriter, req *http.Request) {
		parts := strings.Split(strings.Trim(strings.TrimPrefix(req.URL.Path, "/portForward/"), "/"), "/")
		if len(parts) < 2 || len(parts) > 3 {
			http.Error(w, "expected /portForward/{namespace}/{pod}[/{uid}]", http.StatusNotFound)
			return
		}
		uid := ""
		if len(parts) == 3 {
			uid = parts[2]
		}
		options, err := portforward.NewV4Options(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		log.Printf("port-forward %s/%s", parts[0], parts[1])
		portforward.ServePortForward(w, req, forwarder, parts[1], uid, options,
			4*time.Hour, 30*time.Second, portforward.SupportedProtocols)
	})
	server := &http.Server{
		Addr:              net.JoinHostPort(*address, fmt.Sprint(*port)),
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		// Port-forward streams are HTTP/1.1 upgrades, as on a real kubelet.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	log.Printf("kubelet port-forward on %s", server.Addr)
	log.Fatal(server.ListenAndServeTLS("", ""))
}
