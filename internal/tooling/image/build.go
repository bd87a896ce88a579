package image

import (
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is one image: its platform, its layers (each a list of files, bottom
// first) and its runtime configuration.
type Spec struct {
	Platform   v1.Platform
	Layers     []LayerSpec
	Entrypoint []string
	Cmd        []string
	User       string
	WorkingDir string
	Env        []string
	Labels     map[string]string
	// Created stamps the config, the history and every layer entry.
	Created time.Time
}

// LayerSpec is one layer and what made it (the history's created_by).
type LayerSpec struct {
	CreatedBy string
	Files     []File
}

// Build assembles spec into an OCI image (OCI media types throughout).
func Build(spec Spec) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: spec.Created.UTC().Truncate(time.Second)}
	for _, ls := range spec.Layers {
		l, err := Layer(ls.Files, spec.Created)
		if err != nil {
			return nil, fmt.Errorf("layer %q: %w", ls.CreatedBy, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{Created: created, CreatedBy: ls.CreatedBy}})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = spec.Platform.OS, spec.Platform.Architecture, spec.Platform.Variant
	cf.Created = created
	cf.Config = v1.Config{
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Cmd,
		User:       spec.User,
		WorkingDir: spec.WorkingDir,
		Env:        spec.Env,
		Labels:     spec.Labels,
	}
	return mutate.ConfigFile(img, cf)
}

// Index puts images into one OCI image index, each described by its
// config's platform, in the order given.
func Index(images []v1.Image) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		p := cf.Platform()
		if p == nil {
			return nil, fmt.Errorf("an image of the index has no platform")
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// ParsePlatforms parses "linux/amd64,linux/arm64" (os/arch[/variant], comma
// separated).
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		pl, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		if pl.OS == "" || pl.Architecture == "" {
			return nil, fmt.Errorf("platform %q: want os/arch", p)
		}
		out = append(out, *pl)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform in %q", s)
	}
	return out, nil
}

// Passwd returns /etc/passwd and /etc/group for root and one numeric
// non-root user (uid = gid) whose home is home, so that a runtime and the
// Go runtime's user lookups find the image's USER.
func Passwd(uid int, name, home string) []File {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", name, uid, uid, name, home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", name, uid)
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
	}
}
