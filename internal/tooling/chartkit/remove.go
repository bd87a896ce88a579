package chartkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/helmapp/helm-app-operator/internal/tooling/chartrbac"
	"github.com/helmapp/helm-app-operator/internal/tooling/crdgen"
)

// Remove undoes what Add wrote for kind in the project at root: its
// watches.yaml entry and vendored chart (unless another kind uses it), its
// RELATED_IMAGE_* variables, CRD, sample, editor and viewer roles, PROJECT
// entry, owned CRD and RBAC rules. Removing a kind the project does not have
// changes nothing.
func Remove(root, kind string) (*Report, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if !kindPattern.MatchString(kind) {
		return nil, fmt.Errorf("--kind %q: want a Kubernetes kind, CamelCase starting with an upper-case letter", kind)
	}
	k, err := findKind(root, kind)
	if err != nil {
		return nil, err
	}
	before, err := snapshot(root)
	if err != nil {
		return nil, err
	}
	if err := removeFiles(root, k); err != nil {
		return nil, err
	}
	after, err := snapshot(root)
	if err != nil {
		return nil, err
	}
	return &Report{Removed: true, Names: k, Changed: changedFiles(before, after)}, nil
}

// findKind finds a kind's names in watches.yaml, else in the PROJECT file.
func findKind(root, kind string) (kindNames, error) {
	k := kindNames{Kind: kind}
	entries, err := readWatches(root)
	if err != nil {
		return k, err
	}
	for _, e := range entries {
		if e.Kind == kind {
			k.Group, k.Version, k.Chart = e.Group, e.Version, filepath.ToSlash(filepath.Clean(e.Chart))
		}
	}
	if k.Group == "" {
		doc, _, err := readDoc(filepath.Join(root, projectFile))
		if err != nil {
			return k, err
		}
		if doc != nil {
			if res := get(doc.Content[0], "resources"); res != nil {
				for _, n := range res.Content {
					if sameResource(n, kind) {
						k.Group, k.Version = join(str(n, "group"), str(n, "domain")), str(n, "version")
						k.Group = strings.TrimSuffix(k.Group, ".")
					}
				}
			}
		}
	}
	k.Plural = crdgen.Pluralize(kind)
	if k.Chart != "" {
		if ch, err := loader.Load(filepath.Join(root, filepath.FromSlash(k.Chart))); err == nil {
			if n, err := crdgen.Names(kind, ch.Metadata); err == nil {
				k.Plural = n.Plural
			}
		}
	}
	return k, nil
}

// removeFiles removes what Add wrote for k.
func removeFiles(root string, k kindNames) error {
	if _, err := removeWatch(root, k.Kind); err != nil {
		return err
	}
	if k.Chart != "" && strings.HasPrefix(k.Chart, chartsDir+"/") {
		entries, err := readWatches(root)
		if err != nil {
			return err
		}
		shared := false
		for _, e := range entries {
			shared = shared || filepath.ToSlash(filepath.Clean(e.Chart)) == k.Chart
		}
		if !shared {
			if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(k.Chart))); err != nil {
				return err
			}
		}
	}
	if _, err := writeManagerEnv(root, k.Kind, nil); err != nil {
		return err
	}
	if err := syncCRDs(root); err != nil {
		return err
	}
	if k.Group != "" {
		if _, err := removeResource(filepath.Join(root, crdKustomization), "bases/"+k.crdFile()); err != nil {
			return err
		}
		if _, err := removeIfExists(filepath.Join(root, k.samplePath())); err != nil {
			return err
		}
		if _, err := removeResource(filepath.Join(root, samplesKustomization), k.sampleFile()); err != nil {
			return err
		}
	}
	for _, f := range []string{k.editorRoleFile(), k.viewerRoleFile()} {
		if _, err := removeIfExists(filepath.Join(root, "config", "rbac", f)); err != nil {
			return err
		}
		if _, err := removeResource(filepath.Join(root, rbacKustomization), f); err != nil {
			return err
		}
	}
	if err := removeChartCRDs(root, k); err != nil {
		return err
	}
	if _, err := removeProject(root, k.Kind); err != nil {
		return err
	}
	if _, err := removeCSV(root, k.Kind); err != nil {
		return err
	}
	if err := chartrbac.RemoveRules(root, k.Kind); err != nil {
		return fmt.Errorf("RBAC of %s: %w", k.Kind, err)
	}
	return nil
}
