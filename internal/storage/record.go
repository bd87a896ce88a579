package storage

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
)

// The bounds of a release record, as written and as read. A record is
// data anyone who may write Secrets in a namespace can forge (a tenant with
// the `edit` role), so the operator never lets one decide how much memory a
// read takes: what a record decodes to is capped, and so is the number of
// chunk Secrets a chunked index makes the operator read.
const (
	// SecretDataLimit is the most data the API server accepts in one
	// Secret (1 MiB, the sum of its values): the bound of a revision Helm
	// stores in one.
	SecretDataLimit = 1 << 20

	// ChunkSize is the data of each chunk of a chunked revision. It leaves
	// 8 KiB of the Secret for what the index Secret holds beside its chunk
	// (the names of the other chunks): with 1 MiB chunks the index itself
	// is refused (operator-controller #2702). It must never grow past
	// SecretDataLimit less that room.
	ChunkSize = (1024 - 8) * 1024

	// MaxRecordSize bounds the JSON of one revision, decompressed: 16 MiB,
	// sixteen times what one Secret holds. A revision Helm's format fits
	// in one Secret (768 KiB of gzip) decodes to 3-8 MiB at the ratios
	// release JSON compresses at (manifests and charts, 4-10 to 1), so
	// the bound leaves twice the worst of those; the chunked driver, whose
	// reason to exist is a revision past one Secret, holds up to
	// MaxChunks chunks of it. Both drivers refuse to write a larger
	// revision (TooLargeError), so that nothing the operator writes is
	// refused when read back. A gzip stream reaches about 1000 to 1 (a
	// 1 MiB Secret can hold ~790 MiB of zeros); the bound is what keeps
	// one forged record from taking the operator's memory (issue 38).
	MaxRecordSize = 16 << 20

	// MaxRecordValues bounds the JSON values of one revision (counted by
	// its commas and opening brackets, see jsonValues): JSON decoded into
	// Go values takes up to ~300 bytes a value (an empty object in a list
	// of hooks is a Hook; `[1,1,...]` in the values costs ~20 bytes a
	// byte), so the size bound alone lets 16 MiB of JSON take gigabytes.
	// 256Ki values hold a release whose values have tens of thousands of
	// entries, twice (the release's values and the chart's), and bound
	// what any revision decodes to near 80 MiB at worst.
	MaxRecordValues = 256 << 10

	// ChunkedOwner is the owner label of the chunked driver's Secrets
	// (Helm's are owner=helm, which the helm CLI lists and would fail to
	// decode these).
	ChunkedOwner = "helm-app-operator"
)

// MaxChunks is the most Secrets (the index and its chunks) a chunked
// record of chunks of chunkSize bytes is read from: as many as a revision
// of MaxRecordSize takes once compressed (deflate adds 5 bytes to each 64
// KiB it cannot compress), 17 at ChunkSize.
func MaxChunks(chunkSize int) int {
	return (MaxRecordSize + MaxRecordSize/1024 + chunkSize - 1) / chunkSize
}

// TooLargeError is a revision too large for the storage it is written to:
// for the one Secret of Helm's format (Limit SecretDataLimit, measured on
// its encoding), or for any (its JSON over MaxRecordSize, or with more
// than MaxRecordValues values). The driver refuses it before writing, so
// Helm stops before it applies anything.
type TooLargeError struct {
	// Key is the revision's storage key (sh.helm.release.v1.<name>.v<revision>).
	Key string
	// Size is the revision's size as Helm encodes it, Limit the bound;
	// Decoded is set when both are of its JSON, Values when they count
	// its values.
	Size, Limit int
	Decoded     bool
	Values      bool
}

func (e *TooLargeError) Error() string {
	switch {
	case e.Values:
		return fmt.Sprintf("the revision (%s) has %d values or more in its JSON, over the %d the operator reads back from a record", e.Key, e.Size, e.Limit)
	case e.Decoded:
		return fmt.Sprintf("the revision (%s) is %d bytes of JSON, over the %d the operator reads back from a record", e.Key, e.Size, e.Limit)
	}
	return fmt.Sprintf("the revision is %d bytes as Helm stores it (%s), over the %d bytes a Secret holds; "+
		"set `storage: chunked` on this kind's entry in watches.yaml to store its releases in several Secrets", e.Size, e.Key, e.Limit)
}

// InvalidRecordError is a release record the operator does not read,
// because reading it would pass a bound: it decodes past MaxRecordSize or
// MaxRecordValues, or its index lists more than MaxChunks chunks. Unlike a
// record that does not decode at all (skipped, as Helm's driver skips it),
// it is reported on the release whose history holds it
// (status.ReasonReleaseRecordInvalid), which is not acted on until the
// record is deleted or repaired: it may be a bomb planted by whoever may
// write Secrets, or a revision the operator could not read back.
type InvalidRecordError struct {
	// Namespace and Name are the record's Secret (the index Secret of a
	// chunked record).
	Namespace, Name string
	// Why says which bound it passes ("decodes past 16 MiB").
	Why string
}

func (e *InvalidRecordError) Error() string {
	return fmt.Sprintf("release record Secret %s/%s %s; it is not read: delete or repair it", e.Namespace, e.Name, e.Why)
}

// errPastSize and errTooManyValues are the decoder's verdicts, made an
// InvalidRecordError naming the Secret by the driver that read it.
var (
	errPastSize      = fmt.Errorf("decodes past %d MiB", MaxRecordSize>>20)
	errTooManyValues = fmt.Errorf("decodes to more than %d JSON values", MaxRecordValues)
)

// invalid names the Secret s in the decoder's verdict err when it is one
// of a bound; any other error is returned as it is.
func invalid(s *corev1.Secret, err error) error {
	if errors.Is(err, errPastSize) || errors.Is(err, errTooManyValues) {
		return &InvalidRecordError{Namespace: s.Namespace, Name: s.Name, Why: err.Error()}
	}
	return err
}

// DecodeSecret is the revision Helm's Secret s records, as Helm's Secrets
// driver returns it from a Get of s: decoded (decodeRelease), with s's
// labels but Helm's system labels. A record past a bound is an
// *InvalidRecordError. It is the preload's decoder (release.Memo), and the
// Secrets driver's.
func DecodeSecret(s *corev1.Secret) (*helmrelease.Release, error) {
	r, err := decodeRelease(s.Data["release"])
	if err != nil {
		return nil, invalid(s, err)
	}
	r.Labels = withoutSystemLabels(s.Labels)
	return r, nil
}

var magicGzip = []byte{0x1f, 0x8b, 0x08}

// pooledBufferMax is the largest buffer given back to buffers after a
// decoding: a revision's JSON is rarely larger.
const pooledBufferMax = 4 << 20

// gzipReaders holds gzip readers, each reset before use (nil until the first).
var gzipReaders sync.Pool

// decodeRelease is Helm's decoding of a record's data — base64, then
// gunzip when it starts with gzip's magic (Helm wrote records uncompressed
// before), then JSON — within the bounds: errPastSize for JSON past
// MaxRecordSize, errTooManyValues for more than MaxRecordValues values. The
// base64 stage only shrinks (the API server bounds a Secret's data).
func decodeRelease(data []byte) (*helmrelease.Release, error) {
	b := make([]byte, base64.StdEncoding.DecodedLen(len(data)))
	n, err := base64.StdEncoding.Decode(b, data)
	if err != nil {
		return nil, err
	}
	b = b[:n]
	if len(b) <= 3 || !bytes.Equal(b[:3], magicGzip) {
		if len(b) > MaxRecordSize {
			return nil, errPastSize
		}
		return unmarshal(b)
	}
	r, _ := gzipReaders.Get().(*gzip.Reader)
	if r == nil {
		r = new(gzip.Reader)
	}
	defer gzipReaders.Put(r)
	buf := buffers.Get().(*bytes.Buffer)
	defer func() {
		// Not one a forged record grew: the pool keeps it until the next
		// collections.
		if buf.Cap() <= pooledBufferMax {
			buffers.Put(buf)
		}
	}()
	if b, err = gunzip(r, b, buf); err != nil {
		return nil, err
	}
	return unmarshal(b)
}

// gunzip is the gzip stream z decompressed, with r (reset to it), never
// allocating more than MaxRecordSize and a byte (errPastSize when it
// decompresses past MaxRecordSize).
//
// The gzip trailer states the size of the (last) member (ISIZE, modulo
// 2^32): a stream that states more than MaxRecordSize is refused unread,
// and the buffer is sized by what it states, so that a revision is read
// into one allocation of its size. A stream may lie: one that decompresses
// past what it states is measured, into a small scratch buffer, up to the
// bound, and read again into a buffer of its measured size only if it is
// within it (a stream of several members, which no writer of records
// makes, is read that way too).
//
// What it returns is in buf's memory (a pooled buffer, see buffers).
func gunzip(r *gzip.Reader, z []byte, buf *bytes.Buffer) ([]byte, error) {
	stated := MaxRecordSize + 1
	if len(z) >= 18 { // header (10) + trailer (8)
		if s := binary.LittleEndian.Uint32(z[len(z)-4:]); s <= MaxRecordSize {
			stated = int(s)
		} else {
			return nil, errPastSize
		}
	}
	if err := r.Reset(bytes.NewReader(z)); err != nil {
		return nil, err
	}
	out, err := readAtMost(r, stated, buf)
	if err != nil || len(out) <= stated {
		return out, err
	}
	// More than it states: how much, at most the bound?
	size, err := io.Copy(io.Discard, io.LimitReader(r, int64(MaxRecordSize-len(out)+1)))
	if err != nil {
		return nil, err
	}
	size += int64(len(out))
	if size > MaxRecordSize {
		return nil, errPastSize
	}
	if err := r.Reset(bytes.NewReader(z)); err != nil {
		return nil, err
	}
	return readAtMost(r, int(size), buf)
}

// readAtMost reads r to its end into n+1 bytes of buf's memory (grown to
// hold them, emptied first): what it read, n+1 bytes when r holds more
// than n, and r's error.
func readAtMost(r io.Reader, n int, buf *bytes.Buffer) ([]byte, error) {
	buf.Reset()
	buf.Grow(n + 1)
	b := buf.AvailableBuffer()[:n+1]
	got, err := io.ReadFull(r, b)
	switch {
	case err == nil:
		return b, nil // more than n
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return b[:got], nil
	}
	return nil, err
}

// unmarshal is the release of the JSON b, unless b holds more than
// MaxRecordValues values (errTooManyValues).
func unmarshal(b []byte) (*helmrelease.Release, error) {
	if jsonValues(b, MaxRecordValues) > MaxRecordValues {
		return nil, errTooManyValues
	}
	var rls helmrelease.Release
	if err := json.Unmarshal(b, &rls); err != nil {
		return nil, err
	}
	return &rls, nil
}

// jsonValues counts, up to a little past limit, the commas and opening
// brackets of the JSON b outside its strings: at least the number of
// values it decodes to but one, what Go's decoder allocates for, whatever
// their type. Strings are skipped whole (most of a release's JSON is in
// them: the manifest, the templates), so the count is cheap next to the
// decoding.
func jsonValues(b []byte, limit int) int {
	n := 0
	for i := 0; i < len(b) && n <= limit; i++ {
		switch b[i] {
		case ',', '{', '[':
			n++
		case '"':
			i = stringEnd(b, i+1)
		}
	}
	return n
}

// stringEnd is the index of the quote that ends the JSON string whose
// content starts at b[i] (len(b) when it does not end).
func stringEnd(b []byte, i int) int {
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		i += q
		// Escaped when an odd number of backslashes precede it.
		bs := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			bs++
		}
		if bs%2 == 0 {
			return i
		}
		i++
	}
}

// jsonWithinBounds is nil for the JSON of a revision the drivers may
// write, a *TooLargeError for one they would refuse to read back.
func jsonWithinBounds(key string, b []byte) error {
	if len(b) > MaxRecordSize {
		return &TooLargeError{Key: key, Size: len(b), Limit: MaxRecordSize, Decoded: true}
	}
	if n := jsonValues(b, MaxRecordValues); n > MaxRecordValues {
		return &TooLargeError{Key: key, Size: n, Limit: MaxRecordValues, Values: true}
	}
	return nil
}

// errorsAsInvalid tells whether err is an *InvalidRecordError.
func errorsAsInvalid(err error) bool {
	var inv *InvalidRecordError
	return errors.As(err, &inv)
}
