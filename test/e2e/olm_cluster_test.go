//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"
	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
)

// OLM v1 (operator-framework/operator-controller, pinned in tools/olm) runs
// here out of the cluster: catalogd and operator-controller pull and unpack
// images in their own process, so no pod has to run. What a pod would give
// them is given here:
//   - their identity, read from the service account token file (a token of a
//     ServiceAccount of olmSystemNamespace from the TokenRequest API), in a
//     mount namespace of their own (unshare), never in the host's /run;
//   - catalogd's HTTPS catalog server: a self-signed certificate for
//     127.0.0.1, given to operator-controller as its catalogd CA;
//   - the loopback registry over plain HTTP: a registries.conf marking it
//     insecure (containers/image speaks HTTP only to those);
//   - the label catalogd's mutating webhook would set on a ClusterCatalog
//     (no webhook is registered with the API server).
const (
	olmSystemNamespace = "olmv1-system"
	// olmPackage is our package in the catalog.
	olmPackage = "helm-app-operator"
	// olmInstallNamespace is where the ClusterExtension installs it.
	olmInstallNamespace = "helm-app-operator-system"
	// olmCatalogName is the ClusterCatalog; olmExtensionName the ClusterExtension.
	olmCatalogName   = "helm-app-operator-catalog"
	olmExtensionName = "helm-app-operator"
	// olmCatalogNameLabel is what catalogd's webhook sets on each ClusterCatalog.
	olmCatalogNameLabel = "olm.operatorframework.io/metadata.name"
	// olmOwnerNameLabel is set by operator-controller on what it installs.
	olmOwnerNameLabel = "olm.operatorframework.io/owner-name"
	// olmDeadline bounds OLM's waits: pulling and unpacking a catalog or a
	// bundle on the loaded machine takes longer than an operator's step.
	olmDeadline = 4 * time.Minute
)

var (
	clusterCatalogGVR   = schema.GroupVersionResource{Group: "olm.operatorframework.io", Version: "v1", Resource: "clustercatalogs"}
	clusterExtensionGVR = schema.GroupVersionResource{Group: "olm.operatorframework.io", Version: "v1", Resource: "clusterextensions"}
)

// olmRun is OLM v1 running against the suite's cluster, with the loopback
// registry it pulls from.
type olmRun struct {
	t   *testing.T
	dir string
	reg *img.Registry
	// bins holds catalogd, operator-controller and crds/ (hack/olm-bins.sh).
	bins string
	// casDir holds catalogd's certificate, operator-controller's catalogd CA.
	tlsDir, casDir string
	catalogdAddr   string
	procs          []*operator
	// root is the project shipped and run (its Makefile, watches.yaml and
	// helm-charts/), manager its operator binary; empty, the suite's
	// checkout and operator.
	root, manager string
	// installNS is the namespace the operator is installed in; empty,
	// olmInstallNamespace (OLM v0's tests install in several).
	installNS string
}

// installNamespace is the namespace OLM installs the operator in.
func (o *olmRun) installNamespace() string {
	if o.installNS != "" {
		return o.installNS
	}
	return olmInstallNamespace
}

// projectRoot is the root of the project shipped and run.
func (o *olmRun) projectRoot() string {
	if o.root != "" {
		return o.root
	}
	return suite.root
}

// managerBinary is the operator binary of the project shipped and run.
func (o *olmRun) managerBinary() string {
	if o.manager != "" {
		return o.manager
	}
	return suite.manager
}

// olmBins builds (once, cached) catalogd and operator-controller.
func olmBins(t *testing.T) string {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(suite.root, "hack", "olm-bins.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/olm-bins.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("OLM v1 binaries in %s (%s)", lines[len(lines)-1], time.Since(start).Round(time.Second))
	return lines[len(lines)-1]
}

// shipped is what `make image-push bundle-push catalog-push` printed for one
// version.
type shipped struct {
	version, operator, bundle, catalog string
}

var shippedDigest = regexp.MustCompile(`(?m)^(operator|bundle|catalog) image: (\S+@sha256:[0-9a-f]{64})$`)

// ship runs the Makefile's own targets against the loopback registry: the
// operator image and the bundle of version (bundle-push pushes the operator
// image first), then the catalog image of bundles (by digest, oldest first)
// plus this one. replaces is the bundle's spec.replaces.
func (o *olmRun) ship(version, replaces string, related map[string]string, older ...string) shipped {
	o.t.Helper()
	host := o.reg.Host
	s := shipped{version: version}
	vars := []string{
		"VERSION=" + version,
		"IMG=" + host + "/helm-app-operator:" + version,
		"BUNDLE_IMG=" + host + "/helm-app-operator-bundle:v" + version,
		"PLATFORMS=linux/" + goarch(),
		"REPLACES=" + replaces,
	}
	for k, v := range related {
		vars = append(vars, k+"="+v)
	}
	out := o.make("bundle-push", vars...)
	for _, m := range shippedDigest.FindAllStringSubmatch(out, -1) {
		switch m[1] {
		case "operator":
			s.operator = m[2]
		case "bundle":
			s.bundle = m[2]
		}
	}
	if s.operator == "" || s.bundle == "" {
		o.t.Fatalf("make bundle-push printed no operator or bundle digest:\n%s", out)
	}
	bundles := strings.Join(append(append([]string{}, older...), s.bundle), ",")
	out = o.make("catalog-push", "VERSION="+version, "PLATFORMS=linux/"+goarch(), "BUNDLE_IMG="+bundles,
		"CATALOG_IMG="+host+"/helm-app-operator-catalog:v"+version)
	if m := shippedDigest.FindStringSubmatch(out); m == nil || m[1] != "catalog" {
		o.t.Fatalf("make catalog-push printed no catalog digest:\n%s", out)
	} else {
		s.catalog = m[2]
	}
	o.t.Logf("shipped %s: operator %s, bundle %s, catalog %s", version, s.operator, s.bundle, s.catalog)
	return s
}

func (o *olmRun) make(target string, vars ...string) string {
	o.t.Helper()
	start := time.Now()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", o.projectRoot(), target}, vars...)...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		o.t.Fatalf("make %s %s: %v\n%s", target, strings.Join(vars, " "), err, b)
	}
	o.t.Logf("make %s: %s", target, time.Since(start).Round(time.Second))
	return string(b)
}

func goarch() string {
	if a := os.Getenv("GOARCH"); a != "" {
		return a
	}
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		return "amd64"
	}
	return strings.TrimSpace(string(out))
}

// standIns pushes small random images as the operand images (nginx, echo),
// so that the bundle pins them by digest without reaching a public registry;
// kwok never pulls them.
func (o *olmRun) standIns() map[string]string {
	o.t.Helper()
	return o.pushStandIns(map[string]string{"RELATED_IMAGE_NGINX": "stand-in/nginx:1.27.3", "RELATED_IMAGE_ECHO": "stand-in/echo:1.0.0"})
}

// pushStandIns pushes a small random image to each repository of repos
// (RELATED_IMAGE_* variable to repository:tag) and returns each variable's
// image by digest.
func (o *olmRun) pushStandIns(repos map[string]string) map[string]string {
	o.t.Helper()
	related := map[string]string{}
	for v, repo := range repos {
		im, err := random.Image(512, 1)
		if err != nil {
			o.t.Fatal(err)
		}
		d, err := img.Push(context.Background(), o.reg.Host+"/"+repo, im)
		if err != nil {
			o.t.Fatal(err)
		}
		related[v] = d.String()
	}
	return related
}

// startOLM creates olmSystemNamespace and the two ServiceAccounts, installs
// OLM's CRDs and starts catalogd and operator-controller.
func (o *olmRun) start() {
	o.t.Helper()
	o.kubectl("create", "namespace", olmSystemNamespace)
	o.kubectl("apply", "--server-side", "-f", filepath.Join(o.bins, "crds"))
	o.kubectl("wait", "--for=condition=Established", "crd/clustercatalogs.olm.operatorframework.io",
		"crd/clusterextensions.olm.operatorframework.io", "--timeout="+deadline.String())

	o.tlsDir, o.casDir = filepath.Join(o.dir, "tls"), filepath.Join(o.dir, "catalogd-cas")
	if err := selfSignedLoopback(o.tlsDir, o.casDir); err != nil {
		o.t.Fatal(err)
	}
	conf := filepath.Join(o.dir, "registries.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "[[registry]]\nlocation = %q\ninsecure = true\n", o.reg.Host), 0o644); err != nil {
		o.t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + suite.cp.KubeconfigPath, "CONTAINERS_REGISTRIES_CONF=" + conf}

	o.catalogdAddr = freeLoopbackAddr(o.t)
	o.run("catalogd", "catalogd-controller-manager", env,
		"--system-namespace="+olmSystemNamespace,
		"--catalogs-server-addr="+o.catalogdAddr,
		"--external-address="+o.catalogdAddr,
		"--tls-cert="+filepath.Join(o.tlsDir, "tls.crt"), "--tls-key="+filepath.Join(o.tlsDir, "tls.key"),
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--webhook-server-port="+portOf(freeLoopbackAddr(o.t)),
		"--cache-dir="+filepath.Join(o.dir, "catalogd-cache"))
	o.run("operator-controller", "operator-controller-controller-manager", env,
		"--system-namespace="+olmSystemNamespace,
		"--catalogd-cas-dir="+o.casDir,
		"--health-probe-bind-address=0",
		"--cache-path="+filepath.Join(o.dir, "operator-controller-cache"))
}

// run starts an OLM binary as ServiceAccount sa of olmSystemNamespace: its
// token and namespace are bind-mounted on the service account directory in a
// mount namespace of the process's own.
func (o *olmRun) run(bin, sa string, env []string, args ...string) {
	o.t.Helper()
	saDir := filepath.Join(o.dir, bin+"-serviceaccount")
	if err := os.MkdirAll(saDir, 0o755); err != nil {
		o.t.Fatal(err)
	}
	o.kubectl("create", "serviceaccount", sa, "-n", olmSystemNamespace)
	token := saToken(o.t, olmSystemNamespace, sa)
	if err := os.WriteFile(filepath.Join(saDir, "token"), []byte(token), 0o600); err != nil {
		o.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(saDir, "namespace"), []byte(olmSystemNamespace), 0o644); err != nil {
		o.t.Fatal(err)
	}
	logPath := filepath.Join(o.dir, bin+".log")
	// A tmpfs over /run (/var/run), then the token directory bound where a
	// pod has it; -n: nothing written to the host's /run/mount.
	script := `set -e; d="$1"; shift
mount -n -t tmpfs tmpfs /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
mount -n --bind "$d" /run/secrets/kubernetes.io/serviceaccount
exec "$@"`
	cmdArgs := append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", saDir, filepath.Join(o.bins, bin)}, args...)
	proc, err := controlplane.StartProcess(controlplane.Command{Name: bin, Binary: "unshare", Args: cmdArgs, Dir: o.dir,
		Env: env, LogPath: logPath, KillWithParent: true})
	if err != nil {
		o.t.Fatal(err)
	}
	p := &operator{Process: proc, logPath: logPath, args: cmdArgs}
	o.t.Logf("%s pid %d, log %s", bin, proc.Pid(), logPath)
	o.procs = append(o.procs, p)
}

// exited returns an error when an OLM process is no longer running.
func (o *olmRun) exited() error {
	for _, p := range o.procs {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// stop stops the OLM processes: SIGTERM, SIGKILL after 30s. Their exit
// status is logged, not checked: v1.11.0's catalogd and operator-controller
// exit 1 after a clean shutdown when no global pull secret was configured
// (they fail to remove an auth file they never wrote).
func (o *olmRun) stop() {
	for _, p := range o.procs {
		if err := p.Stop(30 * time.Second); err != nil {
			o.t.Log(err)
		}
		o.t.Logf("%s stopped (%v)", filepath.Base(p.logPath), p.Err())
	}
	o.procs = nil
}

func (o *olmRun) kubectl(args ...string) string {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), olmDeadline)
	defer cancel()
	out, err := suite.cp.Kubectl(ctx, args...)
	if err != nil {
		o.t.Fatalf("%v\nOLM logs in %s", err, o.dir)
	}
	return out
}

// saToken is a token of ServiceAccount ns/name from the TokenRequest API.
func saToken(t *testing.T, ns, name string) string {
	t.Helper()
	tr, err := suite.kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for serviceaccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// saKubeconfig writes a kubeconfig that authenticates as ServiceAccount
// ns/name with a token from the TokenRequest API.
func saKubeconfig(t *testing.T, dir, ns, name string) string {
	t.Helper()
	p, err := tokenKubeconfig(dir, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tokenKubeconfig is saKubeconfig for a caller that is not the test's
// goroutine.
func tokenKubeconfig(dir, ns, name string) (string, error) {
	tr, err := suite.kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for serviceaccount %s/%s: %w", ns, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: suite.cp.Config.Host, CertificateAuthorityData: suite.cp.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["sa"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = "sa"
	p := filepath.Join(dir, "kubeconfig-"+ns+"-"+name)
	return p, clientcmd.WriteToFile(*cfg, p)
}

// selfSignedLoopback writes a self-signed certificate for 127.0.0.1 to
// tlsDir/tls.{crt,key} and the same certificate, as the CA to trust, to
// casDir/ca.crt.
func selfSignedLoopback(tlsDir, casDir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "catalogd on loopback"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, d := range []string{tlsDir, casDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tlsDir, "tls.crt"), crt, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tlsDir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(casDir, "ca.crt"), crt, 0o644)
}

// freeLoopbackAddr is a 127.0.0.1 address with a port free now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
