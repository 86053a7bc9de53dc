// Package kubernetes holds the example manifests (docs/deploy.md) and the
// test that keeps them true: each file decodes strictly into the
// Kubernetes API types (an unknown or misspelt field fails), and the
// Deployment agrees with the server and the Dockerfile: it runs serve,
// with flags serve accepts, probes the route the server answers, gives the
// drain time to finish, never runs privileged, and exposes the ports the
// server listens on.
package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evener-dev/evener-mcp/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// manifests are the decoded objects of every YAML file here.
type manifests struct {
	deployments []appsv1.Deployment
	services    []corev1.Service
	ingresses   []networkingv1.Ingress
}

// load decodes every document of every *.yaml file strictly into its
// kind's API type; a kind this test does not know fails it.
func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var m manifests
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			// Strict as the API server is: duplicate keys, unknown fields and
			// fields spelt in another letter case are errors (encoding/json
			// alone matches names case-insensitively).
			strict := func(into any) {
				j, err := yaml.YAMLToJSONStrict([]byte(doc))
				if err != nil {
					t.Errorf("%s document %d (%s): %v", f, i, head.Kind, err)
					return
				}
				strictErrs, err := sigsjson.UnmarshalStrict(j, into)
				if err != nil {
					t.Errorf("%s document %d (%s): %v", f, i, head.Kind, err)
				}
				for _, e := range strictErrs {
					t.Errorf("%s document %d (%s): %v", f, i, head.Kind, e)
				}
			}
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 Deployment":
				var d appsv1.Deployment
				strict(&d)
				m.deployments = append(m.deployments, d)
			case "v1 Service":
				var s corev1.Service
				strict(&s)
				m.services = append(m.services, s)
			case "networking.k8s.io/v1 Ingress":
				var in networkingv1.Ingress
				strict(&in)
				m.ingresses = append(m.ingresses, in)
			default:
				t.Errorf("%s document %d: %q %q is not a kind this test checks", f, i, head.APIVersion, head.Kind)
			}
		}
	}
	if len(m.deployments) != 1 || len(m.services) != 1 || len(m.ingresses) != 1 {
		t.Fatalf("want one Deployment, Service and Ingress; have %d, %d, %d", len(m.deployments), len(m.services), len(m.ingresses))
	}
	return m
}

func stripComments(doc string) string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// serveContainer is the Deployment's container that runs serve, with its
// flags as name -> value ("true" for a bare flag).
func serveContainer(t *testing.T, d appsv1.Deployment) (corev1.Container, map[string]string) {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("want one container, have %d", len(cs))
	}
	c := cs[0]
	if !slices.Equal(c.Command, []string{"evener-mcp-server", "serve"}) {
		t.Errorf("the container's command is %q, want evener-mcp-server serve", c.Command)
	}
	flags := map[string]string{}
	for _, a := range c.Args {
		if !strings.HasPrefix(a, "--") {
			t.Errorf("arg %q: write every flag as --name=value", a)
			continue
		}
		name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			v = "true"
		}
		flags[name] = v
	}
	return c, flags
}

func port(t *testing.T, hostport string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("%q: %v", hostport, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%q: %v", hostport, err)
	}
	return int32(n)
}

// namedPort resolves a probe's or a Service's port (a number or a name) to
// the container port.
func namedPort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	t.Errorf("port %s is not a port of the container", p.String())
	return -1
}

// TestManifests: the schema check, and the Deployment against the server.
func TestManifests(t *testing.T) {
	m := load(t)
	d := m.deployments[0]
	pod := d.Spec.Template.Spec
	c, flags := serveContainer(t, d)

	// The ports serve listens on are the container's ports.
	listen, metrics := flags["listen"], flags["metrics-listen"]
	if listen == "" || metrics == "" {
		t.Fatalf("the container sets --listen and --metrics-listen explicitly: %v", flags)
	}
	mcpPort := namedPort(t, c, intstr.FromString("mcp"))
	if mcpPort != port(t, listen) {
		t.Errorf("container port mcp %d, --listen %s", mcpPort, listen)
	}
	if p := namedPort(t, c, intstr.FromString("metrics")); p != port(t, metrics) {
		t.Errorf("container port metrics %d, --metrics-listen %s", p, metrics)
	}
	if !server.IsLoopback(metrics) && flags["metrics-allow-remote"] != "true" {
		t.Errorf("--metrics-listen %s is off loopback: serve refuses it without --metrics-allow-remote", metrics)
	}
	if !server.IsLoopback(listen) && !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "EVENER_MCP_TOKEN" }) && flags["token-file"] == "" {
		t.Errorf("--listen %s is off loopback: serve refuses it without a bearer token", listen)
	}

	// Readiness on the server's route and port.
	rp := c.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil {
		t.Fatal("no HTTP readiness probe")
	}
	if rp.HTTPGet.Path != server.HealthPath {
		t.Errorf("readiness path %q, the server answers %q", rp.HTTPGet.Path, server.HealthPath)
	}
	if namedPort(t, c, rp.HTTPGet.Port) != mcpPort {
		t.Errorf("readiness probes port %s, not the MCP listener", rp.HTTPGet.Port.String())
	}
	if lp := c.LivenessProbe; lp != nil && lp.HTTPGet != nil && lp.HTTPGet.Path == server.HealthPath {
		t.Errorf("liveness on %s would restart a draining replica (it answers 503 on purpose)", server.HealthPath)
	}

	// The drain ends before the kubelet's SIGKILL: grace >= preStop +
	// drain + a margin for closing the sessions.
	drain := server.DefaultDrainTimeout
	if v, ok := flags["drain-timeout"]; ok {
		var err error
		if drain, err = time.ParseDuration(v); err != nil {
			t.Fatalf("--drain-timeout %q: %v", v, err)
		}
	}
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		switch h := c.Lifecycle.PreStop; {
		case h.Exec != nil && len(h.Exec.Command) == 2 && h.Exec.Command[0] == "sleep":
			s, err := strconv.Atoi(h.Exec.Command[1])
			if err != nil {
				t.Fatalf("preStop %q", h.Exec.Command)
			}
			preStop = time.Duration(s) * time.Second
		case h.Sleep != nil:
			preStop = time.Duration(h.Sleep.Seconds) * time.Second
		default:
			t.Errorf("a preStop hook this test cannot time: %+v", h)
		}
	}
	grace := 30 * time.Second // the API's default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	if need := preStop + drain + 3*time.Second; grace < need {
		t.Errorf("terminationGracePeriodSeconds %s < preStop %s + drain %s + 3 s to close the sessions", grace, preStop, drain)
	}

	// Never privileged; the rest of the pod security settings
	// docs/deploy.md explains.
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("no container securityContext")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged: true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities: drop ALL and add none (bubblewrap needs none: it runs in a user namespace): %+v", sc.Capabilities)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil {
		t.Fatal("the pod runs as a non-root uid")
	}
	if uid := dockerfileUser(t); *psc.RunAsUser != uid {
		t.Errorf("runAsUser %d, the image's USER %d", *psc.RunAsUser, uid)
	}
	if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount && (pod.HostUsers == nil || *pod.HostUsers) {
		t.Error("procMount: Unmasked needs hostUsers: false")
	}
	if pod.HostPID || pod.HostNetwork || pod.HostIPC {
		t.Error("host namespaces shared with the pod")
	}
	if psc.SeccompProfile == nil || (psc.SeccompProfile.Type != corev1.SeccompProfileTypeUnconfined && psc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost) {
		t.Error("the runtime's default seccomp profile refuses bubblewrap's namespaces: Unconfined or a Localhost profile")
	}
	for _, p := range dockerfileExposed(t) {
		if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == p }) {
			t.Errorf("the image exposes %d, the container does not", p)
		}
	}

	// The Service selects the pods and targets their ports; the ingress
	// routes /mcp to the Service's MCP port.
	svc := m.services[0]
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, the pods do not carry it", k, v)
		}
	}
	var svcMCP *corev1.ServicePort
	for i, sp := range svc.Spec.Ports {
		namedPort(t, c, sp.TargetPort)
		if namedPort(t, c, sp.TargetPort) == mcpPort {
			svcMCP = &svc.Spec.Ports[i]
		}
	}
	if svcMCP == nil {
		t.Fatal("the Service has no port to the MCP listener")
	}
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		t.Error("the Service must keep a client on one replica (sessions live in one replica)")
	}
	in := m.ingresses[0]
	if v := in.Annotations["nginx.ingress.kubernetes.io/proxy-body-size"]; v != "" {
		q, err := resource.ParseQuantity(strings.TrimSuffix(v, "m") + "Mi")
		if err != nil || q.Value() < server.MaxMessageBytes {
			t.Errorf("proxy-body-size %q is below the server's %d-byte message bound", v, server.MaxMessageBytes)
		}
	}
	for _, r := range in.Spec.Rules {
		for _, p := range r.HTTP.Paths {
			b := p.Backend.Service
			if b == nil || b.Name != svc.Name || (b.Port.Name != svcMCP.Name && b.Port.Number != svcMCP.Port) {
				t.Errorf("ingress path %s does not reach the Service's MCP port: %+v", p.Path, b)
			}
			if p.Path != "/mcp" {
				t.Errorf("ingress path %q; the server serves MCP at /mcp", p.Path)
			}
		}
	}
}

var (
	userLine   = regexp.MustCompile(`(?m)^USER\s+(\d+)`)
	exposeLine = regexp.MustCompile(`(?m)^EXPOSE\s+(.+)$`)
)

func dockerfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func dockerfileUser(t *testing.T) int64 {
	m := userLine.FindStringSubmatch(dockerfile(t))
	if m == nil {
		t.Fatal("the Dockerfile sets no numeric USER")
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

func dockerfileExposed(t *testing.T) []int32 {
	var out []int32
	for _, m := range exposeLine.FindAllStringSubmatch(dockerfile(t), -1) {
		for _, f := range strings.Fields(m[1]) {
			n, err := strconv.Atoi(strings.TrimSuffix(f, "/tcp"))
			if err != nil {
				t.Fatalf("EXPOSE %q", f)
			}
			out = append(out, int32(n))
		}
	}
	if len(out) == 0 {
		t.Fatal("the Dockerfile exposes no port")
	}
	return out
}

// TestDeploymentArgsStartServe: the server, built from this tree, starts
// with exactly the Deployment's command and arguments (the listen
// addresses moved to free loopback ports), answers its readiness route and
// serves /metrics; SIGTERM then ends it with status 0. A misspelt flag or
// a refused combination in the manifest fails here, not in a cluster.
func TestDeploymentArgsStartServe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("serve with a sandbox: Linux")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("no bubblewrap")
	}
	m := load(t)
	c, _ := serveContainer(t, m.deployments[0])
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "../../cmd/evener-mcp", "../../cmd/evener-mcp-server", "../../cmd/evener-mcp-inside")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	work := filepath.Join(dir, "work", "project")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(c.Args), "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0") // the last value wins
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, c.Command[0]), append(c.Command[1:], args...)...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "EVENER_MCP_TOKEN=manifest-test-token-0123456789", "HOME="+filepath.Join(dir, "home"), "TMPDIR="+dir)
	var stderr bytes.Buffer
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	addrs := make(chan [2]string, 1)
	go func() {
		var mcp, met string
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			stderr.WriteString(line + "\n")
			if m := regexp.MustCompile(`serving metrics at http://(\S+)/metrics`).FindStringSubmatch(line); m != nil {
				met = m[1]
			}
			if m := regexp.MustCompile(`serving MCP at http://(\S+)/mcp`).FindStringSubmatch(line); m != nil {
				mcp = m[1]
				addrs <- [2]string{mcp, met}
			}
		}
		close(addrs)
	}()
	var a [2]string
	select {
	case got, ok := <-addrs:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("serve exited with the Deployment's arguments %q:\n%s", args, stderr.String())
		}
		a = got
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start within 60 s")
	}
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get("http://" + a[0] + m.deployments[0].Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path); s != http.StatusOK {
		t.Errorf("the readiness route answered %d", s)
	}
	if a[1] == "" {
		t.Errorf("no metrics listener started")
	} else if s := get("http://" + a[1] + "/metrics"); s != http.StatusOK {
		t.Errorf("/metrics answered %d", s)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, stderr.String())
	}
	if t.Failed() {
		fmt.Fprintln(os.Stderr, stderr.String())
	}
}
