package bundle

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// managerImageName is the image name config/manager/manager.yaml uses as a
// placeholder; its kustomization's `images:` entry of that name says which
// image the Deployment really runs.
const managerImageName = "controller"

// buildManifests runs kustomize on config/manifests under root, with the
// manager's image set to image the way `kustomize edit set image
// controller=<image>` would, and returns the objects it produced in
// kustomize's order. The checkout is not modified: config/ is copied into an
// in-memory file system and edited there. A variant (Options.Variant)
// replaces config/manifests' ../default by ../<variant>, itself
// config/default with its patches.
func buildManifests(root, image, variant string) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	configDir := filepath.Join(root, "config")
	err := filepath.WalkDir(configDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		target := path.Join("/", filepath.ToSlash(rel))
		if d.IsDir() {
			return mem.MkdirAll(target)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(target, b)
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", configDir, err)
	}
	if err := setManagerImage(mem, "/config/manager/kustomization.yaml", image); err != nil {
		return nil, err
	}
	if variant != "" {
		if err := useVariant(mem, "/config/manifests/kustomization.yaml", variant); err != nil {
			return nil, err
		}
	}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/config/manifests")
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/manifests: %w", err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/manifests: %w", err)
	}
	return decodeObjects(out)
}

// Variants of the operator's configuration (Options.Variant): directories of
// config/ that are config/default with patches.
const (
	VariantTenancy         = "tenancy"
	VariantServiceAccounts = "service-accounts"
)

// useVariant rewrites the kustomization file at p in fsys to take its
// ../default resource from ../<variant> instead.
func useVariant(fsys filesys.FileSystem, p, variant string) error {
	if variant != VariantTenancy && variant != VariantServiceAccounts {
		return fmt.Errorf("unknown variant %q: %s or %s", variant, VariantTenancy, VariantServiceAccounts)
	}
	return editKustomization(fsys, p, func(k map[string]any) error {
		resources, _ := k["resources"].([]any)
		for i, r := range resources {
			if r == "../default" {
				resources[i] = "../" + variant
				return nil
			}
		}
		return fmt.Errorf("%s has no ../default resource to replace with ../%s", p, variant)
	})
}

// setManagerImage rewrites the `images:` entry named "controller" of the
// kustomization file at p in fsys to image.
func setManagerImage(fsys filesys.FileSystem, p, image string) error {
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return fmt.Errorf("image %q: %w", image, err)
	}
	entry := map[string]any{"name": managerImageName, "newName": reference.FamiliarName(ref)}
	if t, ok := ref.(reference.Tagged); ok {
		entry["newTag"] = t.Tag()
	}
	if d, ok := ref.(reference.Digested); ok {
		entry["digest"] = d.Digest().String()
	}
	return editKustomization(fsys, p, func(k map[string]any) error {
		images, _ := k["images"].([]any)
		found := false
		for i, im := range images {
			if m, ok := im.(map[string]any); ok && m["name"] == managerImageName {
				images[i], found = entry, true
			}
		}
		if !found {
			return fmt.Errorf("%s has no images entry named %q to set the manager's image with", p, managerImageName)
		}
		return nil
	})
}

// editKustomization reads the kustomization file at p in fsys, lets edit
// change it in place, and writes it back.
func editKustomization(fsys filesys.FileSystem, p string, edit func(map[string]any) error) error {
	raw, err := fsys.ReadFile(p)
	if err != nil {
		return err
	}
	var k map[string]any
	if err := sigsyaml.Unmarshal(raw, &k); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if err := edit(k); err != nil {
		return err
	}
	out, err := sigsyaml.Marshal(k)
	if err != nil {
		return err
	}
	return fsys.WriteFile(p, out)
}

// decodeObjects splits a multi-document YAML stream into objects; numbers
// decode as int64 or float64, as the API machinery expects.
func decodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(js)) == 0 || string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("decoding %.60q: %w", doc, err)
		}
		objs = append(objs, u)
	}
}
