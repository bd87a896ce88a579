package ship_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
)

// make bundle-push, as a user runs it: the RELATED_IMAGE_* make variables
// reach the bundle, every image becomes a digest and the digest is printed;
// with an operand that resolves nowhere and STRICT_DIGESTS=1 it fails,
// naming that image. (It pushes the operator image first, for the host's
// platform only, from the build cache of the shipment's real manager.)
func TestMakeBundlePush(t *testing.T) {
	s := images(t)
	host := s.reg.Host
	makeVars := []string{
		"IMG=" + host + "/make/helm-app-operator:0.1.0",
		"BUNDLE_IMG=" + host + "/make/helm-app-operator-bundle:v0.1.0",
		"PLATFORMS=" + hostPlatform.String(),
		"RELATED_IMAGE_NGINX=" + host + "/stand-in/nginx:1.27.3",
	}
	out, err := runMake(t, append(makeVars, "RELATED_IMAGE_ECHO="+host+"/stand-in/echo:1.0.0")...)
	if err != nil {
		t.Fatalf("make bundle-push: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^bundle image: ` + regexp.QuoteMeta(host) + `/make/helm-app-operator-bundle@sha256:[0-9a-f]{64}$`).MatchString(out) {
		t.Errorf("make bundle-push printed no bundle digest:\n%s", out)
	}
	csv, err := bundle.ReadBundleCSV(filepath.Join(tu.RepoRoot(), "bin", "ship", "bundle", "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	if got := csv.Annotations["features.operators.openshift.io/disconnected"]; got != "true" {
		t.Errorf("disconnected = %q, want true with every operand pushed", got)
	}
	for _, ri := range csv.Spec.RelatedImages {
		if !strings.Contains(ri.Image, "@sha256:") {
			t.Errorf("related image %s is not a digest", ri.Image)
		}
	}

	missing := host + "/stand-in/nowhere:9.9.9"
	out, err = runMake(t, append(makeVars, "RELATED_IMAGE_ECHO="+missing, "STRICT_DIGESTS=1")...)
	if err == nil {
		t.Fatalf("make bundle-push STRICT_DIGESTS=1 with %s succeeded:\n%s", missing, out)
	}
	if !strings.Contains(out, "STRICT_DIGESTS") || !strings.Contains(out, missing) || strings.Contains(out, "stand-in/nginx:1.27.3 (nginx)") {
		t.Errorf("the failure does not name %s alone:\n%s", missing, out)
	}
}

func runMake(t *testing.T, vars ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", tu.RepoRoot(), "bundle-push"}, vars...)...)
	cmd.Env = os.Environ()
	b, err := cmd.CombinedOutput()
	return string(b), err
}
