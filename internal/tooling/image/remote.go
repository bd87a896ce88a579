package image

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// remoteOptions authenticate with the default keychain: the credentials of
// ~/.docker/config.json (or $DOCKER_CONFIG), as docker login wrote them.
// A loopback registry (localhost, 127.0.0.1) is spoken to over plain HTTP.
func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// Pushable is an image or an image index.
type Pushable interface {
	Digest() (v1.Hash, error)
}

// Push pushes img (a v1.Image or v1.ImageIndex) to ref and returns the
// pushed reference by digest (repository@sha256:...). Blobs the registry
// already has are not uploaded again.
func Push(ctx context.Context, ref string, img Pushable) (name.Digest, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, err
	}
	switch x := img.(type) {
	case v1.ImageIndex:
		err = remote.WriteIndex(r, x, remoteOptions(ctx)...)
	case v1.Image:
		err = remote.Write(r, x, remoteOptions(ctx)...)
	default:
		return name.Digest{}, fmt.Errorf("push %s: %T is neither an image nor an index", ref, img)
	}
	if err != nil {
		return name.Digest{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}

// Resolve asks ref's registry for the digest ref names (a manifest's or an
// index's), without pulling it.
func Resolve(ctx context.Context, ref string) (name.Digest, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, err
	}
	desc, err := remote.Head(r, remoteOptions(ctx)...)
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(desc.Digest.String()), nil
}

// Pull fetches what ref names: an index, or an image.
func Pull(ctx context.Context, ref string) (*remote.Descriptor, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	return remote.Get(r, remoteOptions(ctx)...)
}

// PullImage fetches the image ref names; for an index, the image of
// platform p.
func PullImage(ctx context.Context, ref string, p v1.Platform) (v1.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	return remote.Image(r, append(remoteOptions(ctx), remote.WithPlatform(p))...)
}

// WriteLayout writes img (image or index) to an OCI image layout at dir,
// replacing what was there, its index.json naming it refName
// (org.opencontainers.image.ref.name).
func WriteLayout(dir, refName string, img Pushable) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	opt := layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": refName})
	switch x := img.(type) {
	case v1.ImageIndex:
		return p.AppendIndex(x, opt)
	case v1.Image:
		return p.AppendImage(x, opt)
	}
	return fmt.Errorf("layout: %T is neither an image nor an index", img)
}
