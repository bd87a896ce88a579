package ship_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
	"github.com/helmapp/helm-app-operator/internal/tooling/ship"
)

// An operand image that resolves nowhere: with STRICT_DIGESTS=1 the bundle
// push fails naming it; without, it stays a tag with a warning naming it,
// and the bundle does not claim to be disconnected-ready.
func TestUnresolvableOperandImage(t *testing.T) {
	s := images(t)
	missing := s.reg.Host + "/stand-in/nowhere:9.9.9"
	related := map[string]string{"RELATED_IMAGE_NGINX": s.reg.Host + "/stand-in/nginx:1.27.3", "RELATED_IMAGE_ECHO": missing}

	strict := bundleOptions(s, related, t.TempDir())
	strict.Strict = true
	strict.Ref = s.reg.Host + "/helmapp/strict-bundle:v0.1.0"
	_, err := ship.PushBundle(context.Background(), strict)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("with STRICT_DIGESTS the push gave %v, want an error naming %s", err, missing)
	}
	if _, err := img.Resolve(context.Background(), strict.Ref); err == nil {
		t.Error("the strict push failed but pushed a bundle image")
	}

	var warnings bytes.Buffer
	lenient := bundleOptions(s, related, t.TempDir())
	lenient.Ref, lenient.Warnings = s.reg.Host+"/helmapp/lenient-bundle:v0.1.0", &warnings
	res, err := ship.PushBundle(context.Background(), lenient)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warnings.String(), missing) {
		t.Errorf("warnings %q do not name %s", warnings.String(), missing)
	}
	csv, err := bundle.ReadBundleCSV(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := csv.Annotations["features.operators.openshift.io/disconnected"]; got != "false" {
		t.Errorf("disconnected = %q with a tag left", got)
	}
	found := false
	for _, ri := range csv.Spec.RelatedImages {
		found = found || ri.Image == missing
	}
	if !found {
		t.Errorf("relatedImages %v lack the tag %s", csv.Spec.RelatedImages, missing)
	}
}

// A registry that needs credentials gets them from ~/.docker/config.json
// ($DOCKER_CONFIG here), as docker login writes them.
func TestPushUsesDockerConfigCredentials(t *testing.T) {
	reg, err := img.ServeRegistry("127.0.0.1:0", "shipper", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	standIn := func(ref string) error { _, err := pushStandIn(context.Background(), ref); return err }

	t.Setenv("DOCKER_CONFIG", t.TempDir())
	if err := standIn(reg.Host + "/private/image:1"); err == nil {
		t.Fatal("a push without credentials succeeded")
	}
	auth := base64.StdEncoding.EncodeToString([]byte("shipper:s3cret"))
	cfg := `{"auths":{"` + reg.Host + `":{"auth":"` + auth + `"}}}`
	if err := os.WriteFile(filepath.Join(os.Getenv("DOCKER_CONFIG"), "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := standIn(reg.Host + "/private/image:1"); err != nil {
		t.Fatalf("a push with the credentials of config.json: %v", err)
	}
	if _, err := img.Resolve(context.Background(), reg.Host+"/private/image:1"); err != nil {
		t.Errorf("resolving with the credentials: %v", err)
	}
}
