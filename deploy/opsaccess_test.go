package deploy_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestOpsTokenFromSecret: the ConfigMap's http.token comes from a Secret
// through the container's environment, ehsink refuses the ConfigMap when
// that variable is missing (so a pod without the Secret never runs
// token-less), and the binary, configured as the pod is, refuses a pause
// without the token and serves one with the Secret's token.
func TestOpsTokenFromSecret(t *testing.T) {
	m := loadManifests(t)
	raw, cfg := m.connectorsYAML(t)
	ref := regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`).FindStringSubmatch(cfg.HTTP.Token)
	if ref == nil {
		t.Fatalf("ConfigMap: http.token %q, want ${VAR} with VAR from the token Secret", cfg.HTTP.Token)
	}
	variable := ref[1]
	var from *corev1.SecretKeySelector
	for _, e := range m.container(t).Env {
		if e.Name == variable && e.ValueFrom != nil {
			from = e.ValueFrom.SecretKeyRef
		}
	}
	if from == nil {
		t.Fatalf("container env %s: want it from a Secret (secretKeyRef)", variable)
	}
	if from.Optional != nil && *from.Optional {
		t.Errorf("container env %s: optional, so a pod could start without the token", variable)
	}
	token, ok := m.secretValue(from.Name, from.Key)
	if !ok || token == "" {
		t.Fatalf("env %s: Secret %s key %s is not in the manifests (%v)", variable, from.Name, from.Key, m.secretKeys())
	}
	if slices.Contains(m.kust.Resources, "ops-token.example.yaml") {
		t.Errorf("kustomization.yaml applies the example token Secret: every cluster would share its token")
	}

	env := m.envFromSecret(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, configKey)
	if err := os.WriteFile(cfgPath, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "validate", "-c", cfgPath)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range env {
		if k != variable {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), variable) {
		t.Errorf("ehsink validate without %s: %v\n%s\nwant it refused, naming the variable", variable, err, out)
	}

	base := runWithHTTP(t, "0.0.0.0", cfg.HTTP.Token, map[string]string{variable: token})
	for _, c := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer wrong", http.StatusUnauthorized}, {"Bearer " + token, http.StatusOK}} {
		req, err := http.NewRequest("POST", base+"/v1/connectors/probe/pause", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("POST pause with Authorization %q: %d, want %d", strings.Replace(c.auth, token, "TOKEN", 1), resp.StatusCode, c.want)
		}
	}
}

// runWithHTTP runs ehsink on the in-process emulator with a stdout sink
// and `http: {listen: HOST:PORT, token: TOKEN}` (a free port, the token as
// written in the ConfigMap), env added to its environment, and returns
// http://127.0.0.1:PORT once GET /v1/connectors/probe answers 200.
func runWithHTTP(t *testing.T, host, token string, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
http: {listen: "`+net.JoinHostPort(host, port)+`", token: "`+token+`"}
emulator: {hubs: {orders: 1}}
connectors:
  - name: probe
    source: {connection: emulator, eventhub: orders}
    checkpoint: {file: {dir: `+filepath.Join(dir, "checkpoints")+`}}
    sink: {type: stdout}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "-c", cfg)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	base := "http://127.0.0.1:" + port
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := http.Get(base + "/v1/connectors/probe"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-exited:
			t.Fatalf("ehsink run exited (%v):\n%s", waitErr, logs.String())
		case <-ctx.Done():
			t.Fatalf("ehsink never served its status:\n%s", logs.String())
		case <-tick.C:
		}
	}
}

// TestNetworkPolicy: a NetworkPolicy selects ehsink's pods for ingress and
// admits, on the operations port only, the pods of the namespace's
// Prometheus and nothing else (no empty peer list, no namespace or IP
// range); the kubelet's probes come from the node, which network policies
// do not block (see the assumptions in networkpolicy.yaml).
func TestNetworkPolicy(t *testing.T) {
	m := loadManifests(t)
	np := m.netpol
	c := m.container(t)
	_, cfg := m.connectorsYAML(t)
	_, listenPort, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil {
		t.Fatalf("ConfigMap: http.listen %q: %v", cfg.HTTP.Listen, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(m.deployment.Spec.Template.Labels)) {
		t.Errorf("NetworkPolicy %s: podSelector %v does not select ehsink's pods (%v)", np.Name, np.Spec.PodSelector, err)
	}
	if !slices.Contains(np.Spec.PolicyTypes, "Ingress") {
		t.Errorf("NetworkPolicy %s: policyTypes %v, want Ingress", np.Name, np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Fatalf("NetworkPolicy %s admits nothing: Prometheus could not scrape", np.Name)
	}
	// opsPort reports whether a port, by name or number, is the
	// container port ehsink listens on.
	opsPort := func(name string, n int32) bool {
		for _, cp := range c.Ports {
			if (name != "" && cp.Name == name || n != 0 && cp.ContainerPort == n) && strconv.Itoa(int(cp.ContainerPort)) == listenPort {
				return true
			}
		}
		return false
	}
	for i, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 {
			t.Errorf("ingress rule %d: no peers, so every source is admitted", i)
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil || peer.NamespaceSelector != nil || peer.PodSelector == nil {
				t.Errorf("ingress rule %d: peer %+v, want only a podSelector of this namespace", i, peer)
				continue
			}
			if peer.PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
				t.Errorf("ingress rule %d: peer %v, want the Prometheus pods (app.kubernetes.io/name: prometheus)", i, peer.PodSelector)
			}
		}
		if len(rule.Ports) == 0 {
			t.Errorf("ingress rule %d: no ports, so every port is admitted", i)
		}
		for _, p := range rule.Ports {
			if p.Port == nil || !opsPort(p.Port.StrVal, p.Port.IntVal) {
				t.Errorf("ingress rule %d: port %v, want only the operations port %s", i, p.Port, listenPort)
			}
		}
	}
	// Prometheus scrapes the pods the Service names, on its target port.
	for _, sp := range m.service.Spec.Ports {
		if !opsPort(sp.TargetPort.StrVal, sp.TargetPort.IntVal) {
			t.Errorf("Service %s: target port %v is not the port the NetworkPolicy admits", m.service.Name, sp.TargetPort)
		}
	}
}
