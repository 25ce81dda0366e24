package helm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// rendered is one rendering of the chart: every object, decoded strictly
// into its Kubernetes type (or the CRD mirror of crd_test.go).
type rendered struct {
	sts             *appsv1.StatefulSet
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	services        map[string]*corev1.Service
	serviceAccounts map[string]*corev1.ServiceAccount
	pdb             *policyv1.PodDisruptionBudget
	scaledObject    *scaledObject
	triggerAuth     *triggerAuthentication
	serviceMonitor  *serviceMonitor
	notes           string
	kinds           []string // apiVersion/kind of every object, in order
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.LoadDir("streamd")
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// render renders the chart with values (YAML) over its defaults, as `helm
// install streamd -n streaming` would: the values schema checked, strict
// templates (a missing value is an error).
func render(t *testing.T, values string) (*rendered, error) {
	t.Helper()
	ch := loadChart(t)
	vals, err := chartcommon.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, chartcommon.ReleaseOptions{
		Name: "streamd", Namespace: "streaming", Revision: 1, IsInstall: true,
	}, chartcommon.DefaultCapabilities, false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.RenderWithContext(context.Background(), ch, top)
	if err != nil {
		return nil, err
	}
	r := &rendered{
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		services: map[string]*corev1.Service{}, serviceAccounts: map[string]*corev1.ServiceAccount{},
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		body := files[name]
		if strings.HasSuffix(name, "NOTES.txt") {
			r.notes = body
			continue
		}
		for i, doc := range splitYAML(body) {
			if err := r.add(doc); err != nil {
				t.Fatalf("%s, document %d: %v\n%s", name, i, err, doc)
			}
		}
	}
	if r.sts == nil {
		t.Fatalf("no StatefulSet rendered")
	}
	return r, nil
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

func splitYAML(s string) []string {
	var docs []string
	for _, d := range docSep.Split(s, -1) {
		// A document of only comments and blank lines is nothing.
		empty := true
		for _, l := range strings.Split(d, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, d)
		}
	}
	return docs
}

// add decodes one object strictly (unknown and duplicate fields fail) into
// the type its apiVersion and kind name.
func (r *rendered) add(doc string) error {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		return err
	}
	kind := tm.APIVersion + "/" + tm.Kind
	r.kinds = append(r.kinds, kind)
	strict := func(into any) error {
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		return nil
	}
	switch kind {
	case "apps/v1/StatefulSet":
		if r.sts != nil {
			return fmt.Errorf("a second StatefulSet")
		}
		r.sts = new(appsv1.StatefulSet)
		return strict(r.sts)
	case "v1/ConfigMap":
		var o corev1.ConfigMap
		if err := strict(&o); err != nil {
			return err
		}
		r.configMaps[o.Name] = &o
	case "v1/Secret":
		var o corev1.Secret
		if err := strict(&o); err != nil {
			return err
		}
		r.secrets[o.Name] = &o
	case "v1/Service":
		var o corev1.Service
		if err := strict(&o); err != nil {
			return err
		}
		r.services[o.Name] = &o
	case "v1/ServiceAccount":
		var o corev1.ServiceAccount
		if err := strict(&o); err != nil {
			return err
		}
		r.serviceAccounts[o.Name] = &o
	case "policy/v1/PodDisruptionBudget":
		r.pdb = new(policyv1.PodDisruptionBudget)
		return strict(r.pdb)
	case "keda.sh/v1alpha1/ScaledObject":
		r.scaledObject = new(scaledObject)
		return strict(r.scaledObject)
	case "keda.sh/v1alpha1/TriggerAuthentication":
		r.triggerAuth = new(triggerAuthentication)
		return strict(r.triggerAuth)
	case "monitoring.coreos.com/v1/ServiceMonitor":
		r.serviceMonitor = new(serviceMonitor)
		return strict(r.serviceMonitor)
	default:
		return fmt.Errorf("unexpected object %s", kind)
	}
	return nil
}

// streamdConfig is the part of streamd.toml the invariants look at.
type streamdConfig struct {
	DataDir string `toml:"data_dir"`
	Admin   struct {
		Listen string `toml:"listen"`
		Auth   struct {
			TokensFile string `toml:"tokens_file"`
		} `toml:"auth"`
		TLS struct {
			CertFile string `toml:"cert_file"`
			KeyFile  string `toml:"key_file"`
		} `toml:"tls"`
	} `toml:"admin"`
	Pipeline []pipelineConfig `toml:"pipeline"`
}

type pipelineConfig struct {
	Name            string `toml:"name"`
	ShutdownTimeout string `toml:"shutdown_timeout"`
	Source          struct {
		Type       string   `toml:"type"`
		Topics     []string `toml:"topics"`
		Group      string   `toml:"group"`
		InstanceID *string  `toml:"instance_id"`
	} `toml:"source"`
}

func (r *rendered) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := r.sts.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "streamd" {
		t.Fatalf("containers: want one, streamd: %+v", cs)
	}
	return cs[0]
}

// config returns streamd.toml from the ConfigMap the pod mounts for -c.
func (r *rendered) config(t *testing.T) (string, streamdConfig) {
	t.Helper()
	c := r.container(t)
	i := slices.Index(c.Args, "-c")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("args %q: no -c FILE", c.Args)
	}
	file := c.Args[i+1]
	mount := r.mountOf(t, c, file)
	vol := r.volume(t, mount.Name)
	if vol.ConfigMap == nil {
		t.Fatalf("%s is not from a ConfigMap: %+v", file, vol)
	}
	cm := r.configMaps[vol.ConfigMap.Name]
	if cm == nil {
		t.Fatalf("ConfigMap %s is not rendered", vol.ConfigMap.Name)
	}
	body, ok := cm.Data[strings.TrimPrefix(file, mount.MountPath+"/")]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", cm.Name, file)
	}
	var sc streamdConfig
	if _, err := toml.Decode(body, &sc); err != nil {
		t.Fatalf("streamd.toml does not decode: %v\n%s", err, body)
	}
	return body, sc
}

// mountOf is the mount of c that holds path.
func (r *rendered) mountOf(t *testing.T, c corev1.Container, path string) corev1.VolumeMount {
	t.Helper()
	var best corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(path, m.MountPath+"/") && len(m.MountPath) > len(best.MountPath) {
			best = m
		}
	}
	if best.Name == "" {
		t.Fatalf("no volume mounted for %s in %+v", path, c.VolumeMounts)
	}
	return best
}

func (r *rendered) volume(t *testing.T, name string) corev1.Volume {
	t.Helper()
	for _, v := range r.sts.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	for _, pvc := range r.sts.Spec.VolumeClaimTemplates {
		if pvc.Name == name {
			return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
		}
	}
	t.Fatalf("no volume %q", name)
	return corev1.Volume{}
}

// checkInvariants holds for every rendering.
func (r *rendered) checkInvariants(t *testing.T) {
	t.Helper()
	sts := r.sts
	c := r.container(t)
	body, cfg := r.config(t)
	pod := sts.Spec.Template

	// Every object is named and labelled for its release.
	if got := sts.Labels["app.kubernetes.io/instance"]; got != "streamd" {
		t.Errorf("StatefulSet labels %v", sts.Labels)
	}
	// The pods' labels are what every selector selects.
	sel, err := metav1LabelSelector(sts.Spec.Selector.MatchLabels)
	if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the StatefulSet's selector %v does not select its pods %v", sts.Spec.Selector, pod.Labels)
	}

	// Stable instance IDs: a StatefulSet (pods keep their names, and the
	// hostname streamd names its ID after), its governing headless Service,
	// the data dir of the config on the pod's own volume, and no fixed
	// instance_id that every pod would share.
	hs := r.services[sts.Spec.ServiceName]
	if hs == nil || hs.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("serviceName %q: no headless Service rendered", sts.Spec.ServiceName)
	} else if !selects(hs.Spec.Selector, pod.Labels) {
		t.Errorf("headless Service selector %v does not select the pods %v", hs.Spec.Selector, pod.Labels)
	}
	if cfg.DataDir == "" {
		t.Errorf("streamd.toml sets no data_dir:\n%s", body)
	} else {
		m := r.mountOf(t, c, cfg.DataDir+"/instances")
		if m.ReadOnly {
			t.Errorf("data_dir %s is mounted read-only", cfg.DataDir)
		}
		v := r.volume(t, m.Name)
		if v.PersistentVolumeClaim == nil && v.EmptyDir == nil {
			t.Errorf("data_dir %s is on volume %+v, neither the pod's claim nor an emptyDir", cfg.DataDir, v)
		}
	}
	for _, p := range cfg.Pipeline {
		if id := p.Source.InstanceID; id != nil && *id != "auto" && *id != "" && !strings.Contains(*id, "${") {
			t.Errorf("pipeline %s: instance_id %q is the same in every pod", p.Name, *id)
		}
	}

	// Probes: readiness on /readyz and liveness on /healthz, on the port
	// the admin listener of the config listens on.
	port := portOf(t, cfg.Admin.Listen)
	var adminPort int32
	for _, p := range c.Ports {
		if p.Name == "admin" {
			adminPort = p.ContainerPort
		}
	}
	if adminPort != port {
		t.Errorf("container port admin %d, the config listens on %q", adminPort, cfg.Admin.Listen)
	}
	scheme := corev1.URISchemeHTTP
	if cfg.Admin.TLS.CertFile != "" {
		scheme = corev1.URISchemeHTTPS
	}
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("%s: not an HTTP GET: %+v", pr.name, pr.probe)
			continue
		}
		g := pr.probe.HTTPGet
		if g.Path != pr.path || g.Port.String() != "admin" || g.Scheme != scheme {
			t.Errorf("%s: GET %s %s on %s, want %s %s on admin", pr.name, g.Scheme, g.Path, g.Port.String(), scheme, pr.path)
		}
	}

	// The grace period covers the longest drain (shutdown_timeout, 30s by
	// default) plus the commit, leave and flush after it.
	maxShutdown := 30 * time.Second
	for _, p := range cfg.Pipeline {
		if p.ShutdownTimeout == "" {
			continue
		}
		d, err := time.ParseDuration(p.ShutdownTimeout)
		if err != nil {
			t.Fatalf("pipeline %s: shutdown_timeout %q: %v", p.Name, p.ShutdownTimeout, err)
		}
		maxShutdown = max(maxShutdown, d)
	}
	grace := pod.Spec.TerminationGracePeriodSeconds
	if grace == nil {
		t.Errorf("no terminationGracePeriodSeconds")
	} else if time.Duration(*grace)*time.Second < maxShutdown+30*time.Second {
		t.Errorf("terminationGracePeriodSeconds %d < the largest shutdown_timeout %v + 30s", *grace, maxShutdown)
	}

	// The admin tokens: the config's tokens_file is a mounted Secret's
	// "tokens" key; a Secret the chart made has a read token for Prometheus
	// and a write token.
	tf := cfg.Admin.Auth.TokensFile
	if tf == "" {
		t.Fatalf("the admin listener on %s has no tokens_file", cfg.Admin.Listen)
	}
	tm := r.mountOf(t, c, tf)
	tv := r.volume(t, tm.Name)
	if tv.Secret == nil || (len(tv.Secret.Items) == 0 && tf != tm.MountPath+"/tokens") || (len(tv.Secret.Items) > 0 && !slices.ContainsFunc(tv.Secret.Items, func(k corev1.KeyToPath) bool {
		return k.Key == "tokens" && tm.MountPath+"/"+k.Path == tf
	})) {
		t.Errorf("tokens_file %s is not the key tokens of a Secret: %+v", tf, tv)
	}
	if s := r.secrets[tv.Secret.SecretName]; s != nil {
		roles := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(s.Data["tokens"])), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 || (f[0] != "read" && f[0] != "write") || len(f[2]) < 16 {
				t.Errorf("tokens line %q: want ROLE NAME TOKEN (16 characters or more)", line)
				continue
			}
			roles[f[2]] = f[0]
		}
		if roles[string(s.Data["metrics-token"])] != "read" || roles[string(s.Data["admin-token"])] != "write" {
			t.Errorf("Secret %s: metrics-token must be a read token and admin-token a write token of its tokens", s.Name)
		}
	}

	// Every ${file:/etc/streamd/secrets/NAME/...} of the config is in a
	// mounted Secret.
	for _, m := range regexp.MustCompile(`\$\{file:([^}]*)\}`).FindAllStringSubmatch(body, -1) {
		fm := r.mountOf(t, c, m[1])
		if v := r.volume(t, fm.Name); v.Secret == nil {
			t.Errorf("${file:%s} is not in a mounted Secret (volume %+v)", m[1], v)
		}
	}

	// A config change rolls the pods.
	sum := sha256.Sum256([]byte(strings.TrimSuffix(body, "\n")))
	if got := pod.Annotations["checksum/config"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("checksum/config %q is not the config's sha256 %x", got, sum)
	}

	// Hardened: not root, read-only root filesystem, no privileges.
	psc, sc := pod.Spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || sc == nil ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("security context: pod %+v, container %+v", psc, sc)
	}

	// Disruptions take one instance at a time, of these pods.
	if r.pdb != nil {
		if r.pdb.Spec.MaxUnavailable == nil || r.pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget maxUnavailable %v", r.pdb.Spec.MaxUnavailable)
		}
		s, err := metav1LabelSelector(r.pdb.Spec.Selector.MatchLabels)
		if err != nil || !s.Matches(labels.Set(pod.Labels)) {
			t.Errorf("PodDisruptionBudget selects %v, not the pods %v", r.pdb.Spec.Selector, pod.Labels)
		}
	}

	// The scaler never asks for more instances than partitions.
	if so := r.scaledObject; so != nil {
		if sts.Spec.Replicas != nil {
			t.Errorf("with a ScaledObject the StatefulSet must leave replicas to it (has %d)", *sts.Spec.Replicas)
		}
		ref := so.Spec.ScaleTargetRef
		if ref.Kind != "StatefulSet" || ref.APIVersion != "apps/v1" || ref.Name != sts.Name {
			t.Errorf("ScaledObject targets %+v, not the StatefulSet %s", ref, sts.Name)
		}
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "kafka" {
			t.Fatalf("ScaledObject triggers %+v", so.Spec.Triggers)
		}
		tr := so.Spec.Triggers[0]
		if tr.Metadata["allowIdleConsumers"] != "false" {
			t.Errorf("the kafka trigger allows idle consumers: %v", tr.Metadata)
		}
		if so.Spec.MaxReplicaCount == nil || so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount > *so.Spec.MaxReplicaCount {
			t.Errorf("ScaledObject replicas %v..%v", so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
		}
		// The group and topic the scaler watches are a pipeline's.
		if !slices.ContainsFunc(cfg.Pipeline, func(p pipelineConfig) bool {
			return p.Source.Group == tr.Metadata["consumerGroup"] && slices.Contains(p.Source.Topics, tr.Metadata["topic"])
		}) {
			t.Errorf("the scaler watches group %q topic %q, which no pipeline of the config reads", tr.Metadata["consumerGroup"], tr.Metadata["topic"])
		}
		if a := tr.AuthenticationRef; a != nil && (r.triggerAuth == nil || r.triggerAuth.Name != a.Name) {
			t.Errorf("the trigger names TriggerAuthentication %s, which is not rendered", a.Name)
		}
	}

	// The ServiceMonitor scrapes /metrics of the admin Service with a
	// read token.
	if sm := r.serviceMonitor; sm != nil {
		svc := r.services[sts.Name]
		if svc == nil || !selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
			t.Errorf("the ServiceMonitor selects %v: not the admin Service", sm.Spec.Selector.MatchLabels)
		}
		if len(sm.Spec.Endpoints) != 1 {
			t.Fatalf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
		}
		ep := sm.Spec.Endpoints[0]
		if ep.Port != "admin" || ep.Path != "/metrics" || !strings.EqualFold(ep.Scheme, string(scheme)) {
			t.Errorf("ServiceMonitor endpoint %+v", ep)
		}
		if ep.Authorization == nil || ep.Authorization.Credentials == nil || ep.Authorization.Credentials.Key != "metrics-token" ||
			ep.Authorization.Credentials.Name != tv.Secret.SecretName {
			t.Errorf("ServiceMonitor authorization %+v: want the metrics-token of %s", ep.Authorization, tv.Secret.SecretName)
		}
	}
}

func selects(selector, lbls map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if lbls[k] != v {
			return false
		}
	}
	return true
}

func metav1LabelSelector(m map[string]string) (labels.Selector, error) {
	if len(m) == 0 {
		return nil, fmt.Errorf("empty selector")
	}
	return labels.SelectorFromSet(m), nil
}

func portOf(t *testing.T, listen string) int32 {
	t.Helper()
	i := strings.LastIndex(listen, ":")
	var p int32
	if _, err := fmt.Sscan(listen[i+1:], &p); i < 0 || err != nil {
		t.Fatalf("admin listen %q: no port", listen)
	}
	return p
}

// TestRender renders the chart with its defaults and with sets of values a
// user would give, and checks every object and the invariants.
func TestRender(t *testing.T) {
	secured, err := os.ReadFile(filepath.Join("examples", "secured.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		values string
		check  func(t *testing.T, r *rendered)
	}{
		{"defaults", "", func(t *testing.T, r *rendered) {
			if got := *r.sts.Spec.Replicas; got != 1 {
				t.Errorf("replicas %d", got)
			}
			if len(r.sts.Spec.VolumeClaimTemplates) != 1 {
				t.Errorf("persistence is on by default: a claim per pod")
			}
			if r.scaledObject != nil || r.serviceMonitor != nil {
				t.Errorf("autoscaling and the ServiceMonitor are off by default")
			}
			if got := *r.sts.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 60 {
				t.Errorf("grace %d, want 30s (the default shutdown_timeout) + 30s", got)
			}
			if want := "streamd:0.1.0"; !strings.HasPrefix(r.container(t).Image, "streamd:") {
				t.Errorf("image %q, want %s (the appVersion)", r.container(t).Image, want)
			}
		}},
		{"secured", string(secured), func(t *testing.T, r *rendered) {
			so := r.scaledObject
			if so == nil || *so.Spec.MaxReplicaCount != 12 {
				t.Fatalf("maxReplicas 24 with 12 partitions: want a cap of 12, got %+v", so)
			}
			if r.triggerAuth == nil || len(r.triggerAuth.Spec.SecretTargetRef) != 3 {
				t.Errorf("TriggerAuthentication %+v: want username, password and ca", r.triggerAuth)
			}
			if got := *r.sts.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 120 {
				t.Errorf("grace %d, want shutdown_timeout 1m30s + 30s", got)
			}
			if r.serviceMonitor == nil || r.serviceMonitor.Spec.Endpoints[0].TLSConfig == nil {
				t.Errorf("ServiceMonitor over HTTPS with the admin CA: %+v", r.serviceMonitor)
			}
		}},
		{"no persistence, a long drain, fractional units", `
persistence: {enabled: false}
replicaCount: 4
config: |
  [kafka]
  brokers = ["kafka:9092"]
  [[pipeline]]
  name = "slow"
  shutdown_timeout = "2m30.5s"
  [pipeline.source]
  type = "kafka"
  topics = ["in"]
  group = "slow"
  instance_id = "${POD_NAME}"
  [pipeline.sink]
  type = "kafka"
  topic = "out"
  [[pipeline]]
  name = "quick"
  shutdown_timeout = "1500ms"
  [pipeline.source]
  type = "kafka"
  topics = ["in2"]
  group = "quick"
  [pipeline.sink]
  type = "kafka"
  topic = "out2"
`, func(t *testing.T, r *rendered) {
			if len(r.sts.Spec.VolumeClaimTemplates) != 0 {
				t.Errorf("persistence off: no claims")
			}
			if got := *r.sts.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 181 {
				t.Errorf("grace %d, want ceil(150.5s) + 30s", got)
			}
		}},
		{"an existing Secret, a digest, a grace period given", `
admin: {auth: {existingSecret: my-tokens}}
image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
terminationGracePeriodSeconds: 300
serviceMonitor: {enabled: true}
`, func(t *testing.T, r *rendered) {
			if len(r.secrets) != 0 {
				t.Errorf("existingSecret: the chart makes no Secret, made %v", r.secrets)
			}
			if img := r.container(t).Image; !strings.HasSuffix(img, "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") {
				t.Errorf("image %q", img)
			}
			if got := *r.sts.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 300 {
				t.Errorf("grace %d", got)
			}
		}},
		{"autoscaling capped by maxReplicas", `
autoscaling: {enabled: true, partitions: 48, maxReplicas: 6, bootstrapServers: "kafka:9092", consumerGroup: upper, topic: orders}
`, func(t *testing.T, r *rendered) {
			if so := r.scaledObject; so == nil || *so.Spec.MaxReplicaCount != 6 {
				t.Fatalf("maxReplicas 6, partitions 48: want 6, got %+v", so)
			}
			if r.triggerAuth != nil || r.scaledObject.Spec.Triggers[0].AuthenticationRef != nil {
				t.Errorf("no auth asked: no TriggerAuthentication")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := render(t, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			r.checkInvariants(t)
			tc.check(t, r)
			t.Logf("rendered %s", strings.Join(r.kinds, ", "))
			if os.Getenv("STREAMD_CHART_DUMP") != "" {
				body, _ := r.config(t)
				t.Logf("streamd.toml:\n%s", body)
			}
		})
	}
}

// TestRenderRefuses: values that would deploy something broken fail at
// `helm install`, with a message that says what to do.
func TestRenderRefuses(t *testing.T) {
	cases := []struct{ name, values, want string }{
		{"data_dir in config", "config: |\n  data_dir = \"/data\"\n  [kafka]\n  brokers = [\"k:9092\"]\n", "leave data_dir out"},
		{"[admin] in config", "config: |\n  [admin]\n  listen = \"0.0.0.0:9000\"\n", "leave [admin] out"},
		{"[admin.auth] in config", "config: |\n  [kafka]\n  brokers = [\"k:9092\"]\n  [admin.auth]\n  tokens_file = \"/t\"\n", "leave [admin] out"},
		{"one instance_id for all", "config: |\n  [[pipeline]]\n  name = \"p\"\n  [pipeline.source]\n  type = \"kafka\"\n  topics = [\"t\"]\n  group = \"g\"\n  instance_id = \"streamd-1\"\n", "fence each other"},
		{"grace below the drain", "terminationGracePeriodSeconds: 40\n", "below the largest shutdown_timeout"},
		{"grace below a long drain", "terminationGracePeriodSeconds: 100\nconfig: |\n  [[pipeline]]\n  name = \"p\"\n  shutdown_timeout = \"2m\"\n", "(150)"},
		{"autoscaling without partitions", "autoscaling: {enabled: true, bootstrapServers: k, consumerGroup: g, topic: t}\n", "autoscaling.partitions"},
		{"autoscaling without a group", "autoscaling: {enabled: true, partitions: 6}\n", "set bootstrapServers, consumerGroup and topic"},
		{"minReplicas above the cap", "autoscaling: {enabled: true, partitions: 2, minReplicas: 3, bootstrapServers: k, consumerGroup: g, topic: t}\n", "above the cap 2"},
		{"sasl without a Secret", "autoscaling: {enabled: true, partitions: 2, bootstrapServers: k, consumerGroup: g, topic: t, auth: {sasl: scram_sha512}}\n", "need autoscaling.auth.secretName"},
		{"a misspelt value", "replicas: 3\n", "replicas"},
		{"a misspelt nested value", "persistence: {enable: false}\n", "enable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// [kafka.embedded] has a data_dir of its own: that one is fine.
	r, err := render(t, "config: |\n  [kafka.embedded]\n  listen = \"127.0.0.1:9092\"\n  data_dir = \"/var/lib/streamd/broker\"\n")
	if err != nil {
		t.Fatalf("[kafka.embedded] data_dir: %v", err)
	}
	r.checkInvariants(t)
}

// TestConfigChangeRollsPods: the pod template changes with the config (so a
// `helm upgrade` with a new config drains and restarts the pods one by
// one), and with nothing else.
func TestConfigChangeRollsPods(t *testing.T) {
	a, err := render(t, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := render(t, "config: |\n  [kafka]\n  brokers = [\"kafka:9092\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	c, err := render(t, "")
	if err != nil {
		t.Fatal(err)
	}
	ka, kb, kc := a.sts.Spec.Template.Annotations["checksum/config"], b.sts.Spec.Template.Annotations["checksum/config"], c.sts.Spec.Template.Annotations["checksum/config"]
	if ka == kb {
		t.Errorf("a new config left the pod template as it was (checksum %s)", ka)
	}
	if ka != kc {
		t.Errorf("the same values gave two checksums: %s %s", ka, kc)
	}
	// The Secret's random tokens do not roll the pods (streamd reads the
	// tokens file again when it changes).
	if !bytes.Equal(mustJSON(t, a.sts.Spec.Template), mustJSON(t, c.sts.Spec.Template)) {
		t.Errorf("two renderings of the same values have different pod templates")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChartMetadata: the chart loads and validates as Helm does before it
// packages it (scripts/dist sets version and appVersion).
func TestChartMetadata(t *testing.T) {
	ch := loadChart(t)
	if err := ch.Validate(); err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.APIVersion != chart.APIVersionV2 || ch.Metadata.Type != "application" {
		t.Errorf("metadata %+v", ch.Metadata)
	}
}
