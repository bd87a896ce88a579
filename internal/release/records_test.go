package release

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// The chunk size of the chunked storage leaves room in its index Secret for
// the list of the other chunks: 1 MiB chunks made the index Secret itself
// too large (operator-controller #2702). Pinned: it must never grow.
func TestChunkSizeLeavesRoomForTheIndex(t *testing.T) {
	if ChunkSize != 1040384 {
		t.Errorf("ChunkSize = %d, want (1024-8)*1024 = 1040384", ChunkSize)
	}
	if room := SecretDataLimit - ChunkSize; room < 8<<10 {
		t.Errorf("a chunk leaves %d bytes of a Secret's %d for the index data, want at least 8 KiB", room, SecretDataLimit)
	}
	if SecretDataLimit != 1048576 {
		t.Errorf("SecretDataLimit = %d, want the API server's 1048576", SecretDataLimit)
	}
}

// Every release record this operator reads is selected, and no chunk.
func TestRecordSelector(t *testing.T) {
	for _, tt := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"owner": "helm", "name": "web", "version": "1"}, true},
		{map[string]string{"owner": ChunkedOwner, "name": "web", "version": "1", "type": "index"}, true},
		{map[string]string{"owner": ChunkedOwner, "key": "sh.helm.release.v1.web.v1", "type": "chunk"}, false},
		{map[string]string{"owner": "someone", "name": "web"}, false},
	} {
		if got := RecordSelector.Matches(labels.Set(tt.labels)); got != tt.want {
			t.Errorf("RecordSelector matches %v: %v, want %v", tt.labels, got, tt.want)
		}
	}
	if !RecordsOf("web").Matches(labels.Set{"owner": "helm", "name": "web"}) || RecordsOf("web").Matches(labels.Set{"owner": "helm", "name": "other"}) {
		t.Errorf("RecordsOf(web) does not select exactly web's records")
	}
}
