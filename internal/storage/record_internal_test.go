package storage

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bomb is the gzip (best compression, one member) of a release's JSON
// padded with size bytes of whitespace: valid JSON, which an unbounded
// decoder reads whole and accepts.
func bomb(t testing.TB, size int) []byte {
	t.Helper()
	var z bytes.Buffer
	w, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte(`{"name":"web","version":2,"info":{"status":"deployed"}`))
	pad := bytes.Repeat([]byte{' '}, 1<<20)
	for left := size; left > 0; left -= len(pad) {
		_, _ = w.Write(pad[:min(left, len(pad))])
	}
	_, _ = w.Write([]byte("}"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// allocated is what f allocates on the heap, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A record whose JSON is past MaxRecordSize is refused, and reading it
// never allocates much past the bound: not when its gzip trailer states its
// size (refused unread), not when the trailer lies (it is read to the bound
// into a small scratch buffer), whatever it decompresses to. A record
// within the bound decodes as before, gzipped or plain.
func TestDecoderRefusesABombWithoutAllocatingIt(t *testing.T) {
	z := bomb(t, 256<<20) // 256 MiB of JSON in ~250 KiB
	lying := bytes.Clone(z)
	binary.LittleEndian.PutUint32(lying[len(lying)-4:], 1000) // states 1000 bytes
	atBound := bytes.Clone(z)
	binary.LittleEndian.PutUint32(atBound[len(atBound)-4:], MaxRecordSize)
	for name, data := range map[string][]byte{"stating its size": z, "stating 1000 bytes": lying, "stating the bound": atBound} {
		t.Run(name, func(t *testing.T) {
			enc := []byte(base64.StdEncoding.EncodeToString(data))
			var err error
			got := allocated(func() { _, err = decodeRelease(enc) })
			if !errors.Is(err, errPastSize) {
				t.Fatalf("decoding a record of 256 MiB of JSON: %v, want %v", err, errPastSize)
			}
			// The base64 decoding (the size of the gzip), the bound, slack.
			if most := uint64(len(data) + MaxRecordSize + 1<<20); got > most {
				t.Errorf("decoding it allocated %d MiB, over %d MiB", got>>20, most>>20)
			}
			t.Logf("refused after allocating %d KiB", got>>10)
		})
	}

	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "sh.helm.release.v1.web.v2"},
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(z))}}
	_, err := DecodeSecret(s)
	var inv *InvalidRecordError
	if !errors.As(err, &inv) || err.Error() != "release record Secret a/sh.helm.release.v1.web.v2 decodes past 16 MiB; it is not read: delete or repair it" {
		t.Errorf("DecodeSecret of the bomb: %v", err)
	}

	small := bomb(t, 1<<20)
	for name, data := range map[string][]byte{"gzipped": small, "plain": []byte(`{"name":"web","version":2}`)} {
		r, err := decodeRelease([]byte(base64.StdEncoding.EncodeToString(data)))
		if err != nil || r.Name != "web" || r.Version != 2 {
			t.Errorf("%s record within the bound: %+v, %v", name, r, err)
		}
	}
	// A stream that states less than it holds, within the bound, is read.
	binary.LittleEndian.PutUint32(small[len(small)-4:], 10)
	if _, err := decodeRelease([]byte(base64.StdEncoding.EncodeToString(small))); err == nil || errors.Is(err, errPastSize) {
		t.Errorf("a stream whose stated size is wrong: %v, want gzip's checksum error", err)
	}
}

// JSON that decodes to more values than MaxRecordValues is refused before
// it is decoded (an empty object in a list of hooks is a Hook of ~300
// bytes); a release with many values, under the bound, is not.
func TestDecoderRefusesTooManyJSONValues(t *testing.T) {
	js := `{"name":"web","version":2,"hooks":[` + strings.Repeat("{},", MaxRecordValues) + `{}]}`
	var err error
	got := allocated(func() { _, err = unmarshal([]byte(js)) })
	if !errors.Is(err, errTooManyValues) {
		t.Fatalf("JSON of %d hooks: %v, want %v", MaxRecordValues+1, err, errTooManyValues)
	}
	if got > 1<<20 {
		t.Errorf("refusing it allocated %d KiB", got>>10)
	}
	// Commas and brackets in strings are not values.
	quoted := `{"name":"web","manifest":"` + strings.Repeat(`[,{\"`, MaxRecordValues) + `","version":2}`
	if r, err := unmarshal([]byte(quoted)); err != nil || r.Version != 2 {
		t.Errorf("JSON with brackets in a string: %v", err)
	}
	if err := jsonWithinBounds("k", []byte(js)); err == nil {
		t.Error("the drivers would write a revision they refuse to read")
	}
}

// Neither driver writes a revision it would refuse to read back: the
// Secrets driver refuses one whose JSON is past MaxRecordSize even when it
// compresses into one Secret, before any request.
func TestDriversRefuseToWriteWhatTheyWouldNotRead(t *testing.T) {
	rel := &helmrelease.Release{Name: "web", Version: 1, Info: &helmrelease.Info{Status: helmrelease.StatusDeployed},
		Manifest: strings.Repeat("a: b\n", MaxRecordSize/5+1)}
	d := newHelmSecrets(nil) // no client: a request would panic
	err := d.Create("sh.helm.release.v1.web.v1", rel)
	var tl *TooLargeError
	if !errors.As(err, &tl) || !tl.Decoded {
		t.Fatalf("Create of %d MiB of JSON: %v, want a TooLargeError of its JSON", len(rel.Manifest)>>20, err)
	}
	c := newChunkedSecrets(nil, ChunkedOwner, ChunkSize)
	if err := c.Create("sh.helm.release.v1.web.v1", rel); !errors.As(err, &tl) {
		t.Fatalf("the chunked driver's Create: %v, want a TooLargeError", err)
	}
	if n := MaxChunks(ChunkSize); n != 17 {
		t.Errorf("MaxChunks(ChunkSize) = %d, want 17", n)
	}
}
