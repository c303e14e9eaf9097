package deploy_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// manifests are the objects of deploy/kubernetes, one of each kind.
type manifests struct {
	deployment appsv1.Deployment
	configMap  corev1.ConfigMap
	secrets    []corev1.Secret // every Secret, the examples included
	service    corev1.Service
	netpol     networkingv1.NetworkPolicy
	pdb        policyv1.PodDisruptionBudget
	scaled     scaledObject
	auth       triggerAuthentication
	kust       kustomization
	files      []string // the file names, sorted
}

// loadManifests decodes every YAML document under deploy/kubernetes
// strictly (an unknown or misspelt field fails) into its upstream type.
func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{}
	targets := map[string]any{
		"apps/v1 Deployment":                            &m.deployment,
		"v1 ConfigMap":                                  &m.configMap,
		"v1 Service":                                    &m.service,
		"policy/v1 PodDisruptionBudget":                 &m.pdb,
		"networking.k8s.io/v1 NetworkPolicy":            &m.netpol,
		"keda.sh/v1alpha1 ScaledObject":                 &m.scaled,
		"keda.sh/v1alpha1 TriggerAuthentication":        &m.auth,
		"kustomize.config.k8s.io/v1beta1 Kustomization": &m.kust,
	}
	seen := map[string]string{}
	paths, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes (%v)", err)
	}
	for _, p := range paths {
		m.files = append(m.files, filepath.Base(p))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s document %d: %v", p, i, err)
			}
			key := tm.APIVersion + " " + tm.Kind
			if key == "v1 Secret" {
				// Secrets are several: the connection strings and the
				// operations token, each for its own readers.
				var sec corev1.Secret
				if err := yaml.UnmarshalStrict([]byte(doc), &sec); err != nil {
					t.Fatalf("%s document %d (%s): %v", p, i, key, err)
				}
				m.secrets = append(m.secrets, sec)
				continue
			}
			target, ok := targets[key]
			if !ok {
				t.Fatalf("%s document %d: %s: not a kind this test knows; add it to loadManifests", p, i, key)
			}
			if prev, dup := seen[key]; dup {
				t.Fatalf("%s document %d: a second %s (the first is in %s)", p, i, key, prev)
			}
			seen[key] = p
			if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
				t.Fatalf("%s document %d (%s): %v", p, i, key, err)
			}
		}
	}
	for key := range targets {
		if _, ok := seen[key]; !ok {
			t.Fatalf("deploy/kubernetes has no %s", key)
		}
	}
	if len(m.secrets) == 0 {
		t.Fatal("deploy/kubernetes has no v1 Secret")
	}
	return m
}

// secretValue returns the value of key in the Secret named name.
func (m *manifests) secretValue(name, key string) (string, bool) {
	for _, s := range m.secrets {
		if s.Name == name {
			v, ok := s.StringData[key]
			return v, ok
		}
	}
	return "", false
}

// secretKeys lists every Secret's keys as NAME/KEY, for messages.
func (m *manifests) secretKeys() []string {
	var out []string
	for _, s := range m.secrets {
		for k := range s.StringData {
			out = append(out, s.Name+"/"+k)
		}
	}
	slices.Sort(out)
	return out
}

// opsConfig is the part of the ConfigMap's connectors.yaml the manifests
// depend on. ehsink validate checks the whole file.
type opsConfig struct {
	DrainTimeout string `json:"drain_timeout"`
	HTTP         struct {
		Listen    string `json:"listen"`
		Token     string `json:"token"`
		TokenFile string `json:"token_file"`
	} `json:"http"`
	Connectors []struct {
		Name   string `json:"name"`
		Source struct {
			EventHub      string `json:"eventhub"`
			ConsumerGroup string `json:"consumer_group"`
		} `json:"source"`
		Checkpoint struct {
			Blob *struct {
				Container string `json:"container"`
			} `json:"blob"`
		} `json:"checkpoint"`
	} `json:"connectors"`
}

const configKey = "connectors.yaml"

func (m *manifests) connectorsYAML(t *testing.T) (string, opsConfig) {
	t.Helper()
	raw, ok := m.configMap.Data[configKey]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", m.configMap.Name, configKey)
	}
	var cfg opsConfig
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("ConfigMap %s: %s: %v", m.configMap.Name, configKey, err)
	}
	return raw, cfg
}

func (m *manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("Deployment %s: %d containers, want 1", m.deployment.Name, len(cs))
	}
	return cs[0]
}

func TestKustomizationListsTheManifests(t *testing.T) {
	m := loadManifests(t)
	var want []string
	for _, f := range m.files {
		if f != "kustomization.yaml" && !strings.Contains(f, ".example.") {
			want = append(want, f)
		}
	}
	got := slices.Sorted(slices.Values(m.kust.Resources))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources %v, want the manifests %v (examples excluded)", got, want)
	}
}

func TestSelectorsMatchThePods(t *testing.T) {
	m := loadManifests(t)
	pod := labels.Set(m.deployment.Spec.Template.Labels)
	for what, sel := range map[string]*metav1.LabelSelector{
		"Deployment " + m.deployment.Name:   m.deployment.Spec.Selector,
		"PodDisruptionBudget " + m.pdb.Name: m.pdb.Spec.Selector,
	} {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || s.Empty() || !s.Matches(pod) {
			t.Errorf("%s: selector %v does not select the pods (labels %v; %v)", what, sel, pod, err)
		}
	}
	if s := labels.SelectorFromSet(m.service.Spec.Selector); len(m.service.Spec.Selector) == 0 || !s.Matches(pod) {
		t.Errorf("Service %s: selector %v does not select the pods (labels %v)", m.service.Name, m.service.Spec.Selector, pod)
	}
}

func TestPortsAndProbes(t *testing.T) {
	m := loadManifests(t)
	c := m.container(t)
	_, cfg := m.connectorsYAML(t)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	_, listenPort, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil {
		t.Fatalf("ConfigMap: http.listen %q: %v", cfg.HTTP.Listen, err)
	}
	if host, _, _ := net.SplitHostPort(cfg.HTTP.Listen); host != "0.0.0.0" && host != "" && host != "::" {
		t.Errorf("ConfigMap: http.listen %q: the kubelet probes the pod IP, so listen on all interfaces", cfg.HTTP.Listen)
	}
	port := func(what string, p any) int32 {
		switch v := p.(type) {
		case string:
			n, ok := ports[v]
			if !ok {
				t.Errorf("%s: port %q is not a container port (%v)", what, v, ports)
			}
			return n
		case int32:
			return v
		}
		return 0
	}
	probes := map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe}
	for name, p := range probes {
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("container %s: %s is not an httpGet probe", c.Name, name)
		}
		got := port(name, intOrString(p.HTTPGet.Port.StrVal, p.HTTPGet.Port.IntVal))
		if strconv.Itoa(int(got)) != listenPort {
			t.Errorf("%s: port %d, but ehsink listens on %s (http.listen)", name, got, cfg.HTTP.Listen)
		}
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes on %s (liveness) and %s (readiness), want /healthz and /readyz", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	for _, sp := range m.service.Spec.Ports {
		if got := port("Service "+m.service.Name, intOrString(sp.TargetPort.StrVal, sp.TargetPort.IntVal)); strconv.Itoa(int(got)) != listenPort {
			t.Errorf("Service %s: targets port %d, ehsink listens on %s", m.service.Name, got, cfg.HTTP.Listen)
		}
	}

	// The paths must be served by ehsink itself, and turn 200 once a
	// connector runs.
	for _, p := range []string{c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path, "/metrics"} {
		if code := servedStatus(t, p); code != http.StatusOK {
			t.Errorf("ehsink serves %s with %d, want 200 once its connector runs", p, code)
		}
	}
}

func intOrString(s string, i int32) any {
	if s != "" {
		return s
	}
	return i
}

// servedStatus runs ehsink on the in-process emulator with a stdout sink,
// its HTTP listener on a free loopback port, and returns the status of a
// GET of path once it is 200, or the last status when it never gets there.
func servedStatus(t *testing.T, urlPath string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
emulator: {hubs: {orders: 2}}
connectors:
  - name: probe
    source:
      connection: emulator
      eventhub: orders
      load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 4s}
    checkpoint: {file: {dir: `+filepath.Join(dir, "checkpoints")+`}}
    sink: {type: stdout}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "-c", cfg, "--http", addr)
	cmd.Dir = dir
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	last := 0
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := http.Get("http://" + addr + urlPath); err == nil {
			resp.Body.Close()
			if last = resp.StatusCode; last == http.StatusOK {
				return last
			}
		}
		select {
		case <-exited:
			t.Fatalf("ehsink run exited (%v):\n%s", waitErr, logs.String())
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			t.Logf("ehsink logs:\n%s", logs.String())
			return last
		case <-tick.C:
		}
	}
}

func TestGracePeriodExceedsDrainTimeout(t *testing.T) {
	m := loadManifests(t)
	_, cfg := m.connectorsYAML(t)
	drain := 30 * time.Second // ehsink's default
	if cfg.DrainTimeout != "" {
		var err error
		if drain, err = time.ParseDuration(cfg.DrainTimeout); err != nil {
			t.Fatalf("drain_timeout %q: %v", cfg.DrainTimeout, err)
		}
	}
	grace := m.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds %v, want more than drain_timeout %s", grace, drain)
	}
}

// envFromSecret returns the container's environment as the pod would see
// it, with values taken from the example Secret.
func (m *manifests) envFromSecret(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range m.container(t).Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := m.secretValue(ref.Name, ref.Key)
			if !ok {
				t.Errorf("env %s: secret %s key %s is not in the Secrets (%v)", e.Name, ref.Name, ref.Key, m.secretKeys())
			}
			env[e.Name] = v
		case e.ValueFrom.ResourceFieldRef != nil:
			env[e.Name] = "536870912"
		default:
			t.Errorf("env %s: a source this test does not know", e.Name)
		}
	}
	return env
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestConfigMapValidates runs `ehsink validate` on the ConfigMap's
// connectors.yaml with the environment the Deployment gives it, mounted
// where the container's -c flag looks.
func TestConfigMapValidates(t *testing.T) {
	m := loadManifests(t)
	c := m.container(t)
	raw, _ := m.connectorsYAML(t)

	i := slices.Index(c.Args, "-c")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("container args %q: no -c FILE", c.Args)
	}
	file := c.Args[i+1]
	mounted := false
	for _, vm := range c.VolumeMounts {
		for _, v := range m.deployment.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil || v.ConfigMap.Name != m.configMap.Name {
				continue
			}
			for _, it := range v.ConfigMap.Items {
				if it.Key == configKey && path.Join(vm.MountPath, it.Path) == file {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Errorf("-c %s: no volume mounts the ConfigMap's %s there", file, configKey)
	}

	env := m.envFromSecret(t)
	for _, ref := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(raw, -1) {
		if _, ok := env[ref[1]]; !ok {
			t.Errorf("connectors.yaml uses ${%s}, which the container's env does not set", ref[1])
		}
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, configKey)
	if err := os.WriteFile(cfgPath, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "validate", "-c", cfgPath)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("ehsink validate on the ConfigMap's %s: %v\n%s", configKey, err, out)
	}
}

// TestRunsAsTheImageUser checks the pod against the Dockerfile: the same
// non-root user, and with a read-only root a writable volume on the
// image's working directory.
func TestRunsAsTheImageUser(t *testing.T) {
	m := loadManifests(t)
	c := m.container(t)
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	var user, workdir string
	for _, in := range stages[len(stages)-1].body {
		switch in.cmd {
		case "USER":
			user, _, _ = strings.Cut(in.args, ":")
		case "WORKDIR":
			workdir = in.args
		}
	}
	psc := m.deployment.Spec.Template.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || strconv.FormatInt(*psc.RunAsUser, 10) != user {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and runAsUser %s (the image's USER)", psc, user)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container %s: want readOnlyRootFilesystem", c.Name)
	}
	writable := slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == workdir && !vm.ReadOnly })
	if !writable {
		t.Errorf("container %s: no writable volume on the image's WORKDIR %s, where local state goes", c.Name, workdir)
	}
}

// TestScaledObject checks the KEDA trigger against the connector it scales:
// same event hub, consumer group and checkpoint container, KEDA's blob
// layout, credentials from the Secret, and no more replicas than
// partitions.
func TestScaledObject(t *testing.T) {
	m := loadManifests(t)
	_, cfg := m.connectorsYAML(t)
	so := m.scaled.Spec
	if so.ScaleTargetRef.Name != m.deployment.Name || (so.ScaleTargetRef.Kind != "" && so.ScaleTargetRef.Kind != "Deployment") {
		t.Errorf("scaleTargetRef %+v, want the Deployment %s", so.ScaleTargetRef, m.deployment.Name)
	}
	parts, err := strconv.Atoi(m.scaled.Annotations["ehsink.io/eventhub-partitions"])
	if err != nil {
		t.Fatalf("ScaledObject annotation ehsink.io/eventhub-partitions: %v", err)
	}
	if so.MaxReplicaCount == nil || int(*so.MaxReplicaCount) > parts {
		t.Errorf("maxReplicaCount %v, want at most the %d partitions (a replica beyond them owns nothing)", so.MaxReplicaCount, parts)
	}
	if so.MinReplicaCount != nil && so.MaxReplicaCount != nil && *so.MinReplicaCount > *so.MaxReplicaCount {
		t.Errorf("minReplicaCount %d > maxReplicaCount %d", *so.MinReplicaCount, *so.MaxReplicaCount)
	}
	if len(so.Triggers) != 1 || so.Triggers[0].Type != "azure-eventhub" {
		t.Fatalf("triggers %+v, want one azure-eventhub trigger", so.Triggers)
	}
	if len(cfg.Connectors) != 1 {
		t.Fatalf("the ConfigMap has %d connectors; the ScaledObject scales on one", len(cfg.Connectors))
	}
	conn := cfg.Connectors[0]
	group := conn.Source.ConsumerGroup
	if group == "" {
		group = "$Default"
	}
	if conn.Checkpoint.Blob == nil {
		t.Fatalf("connector %s: KEDA reads Blob checkpoints; the connector has none", conn.Name)
	}
	md := so.Triggers[0].Metadata
	for key, want := range map[string]string{
		"checkpointStrategy": "blobMetadata",
		"eventHubName":       conn.Source.EventHub,
		"consumerGroup":      group,
		"blobContainer":      conn.Checkpoint.Blob.Container,
	} {
		if md[key] != want {
			t.Errorf("trigger metadata %s: %q, want %q", key, md[key], want)
		}
	}
	// KEDA puts the event hub name into the blob path as written, ehsink
	// writes it lowercase.
	if h := md["eventHubName"]; h != strings.ToLower(h) {
		t.Errorf("trigger eventHubName %q: KEDA reads the checkpoint under this exact name, ehsink writes %q", h, strings.ToLower(h))
	}
	if n, err := strconv.Atoi(md["unprocessedEventThreshold"]); err != nil || n <= 0 {
		t.Errorf("unprocessedEventThreshold %q: want a positive number", md["unprocessedEventThreshold"])
	}

	ref := so.Triggers[0].AuthenticationRef
	if ref == nil || ref.Name != m.auth.Name {
		t.Fatalf("authenticationRef %+v, want the TriggerAuthentication %s", ref, m.auth.Name)
	}
	params := map[string]bool{}
	for _, s := range m.auth.Spec.SecretTargetRef {
		params[s.Parameter] = true
		if _, ok := m.secretValue(s.Name, s.Key); !ok {
			t.Errorf("TriggerAuthentication %s: %s from secret %s key %s, which the Secrets lack (%v)", m.auth.Name, s.Parameter, s.Name, s.Key, m.secretKeys())
		}
	}
	if !params["connection"] || !params["storageConnection"] {
		t.Errorf("TriggerAuthentication %s gives %v, want connection and storageConnection", m.auth.Name, params)
	}
	// The credentials KEDA reads are the ones the connector uses.
	env := m.envFromSecret(t)
	for _, s := range m.auth.Spec.SecretTargetRef {
		if !slices.ContainsFunc(m.container(t).Env, func(e corev1.EnvVar) bool {
			return e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == s.Key
		}) {
			t.Errorf("TriggerAuthentication %s: key %s is not one ehsink reads (env %v)", m.auth.Name, s.Key, slices.Sorted(mapKeys(env)))
		}
	}
}
