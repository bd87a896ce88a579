package operator

import (
	"slices"
	"testing"
)

func TestShardLeaseIDAndKeys(t *testing.T) {
	none, err := parseShard("")
	if err != nil || none.leaseID("x") != "x" || none.keys != nil {
		t.Fatalf("no selector: %v, lease %q, keys %v; want the ID unchanged", err, none.leaseID("x"), none.keys)
	}
	a, _ := parseShard("helmapp.io/shard=a")
	a2, _ := parseShard("helmapp.io/shard = a")
	rest, _ := parseShard("!helmapp.io/shard")
	multi, err := parseShard("helmapp.io/shard in (a,b),tier!=x,helmapp.io/shard")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{a.leaseID("op"): true, rest.leaseID("op"): true, multi.leaseID("op"): true}
	if len(ids) != 3 {
		t.Errorf("shards share a lease ID: %v", ids)
	}
	if a.leaseID("op") != a2.leaseID("op") {
		t.Errorf("one selector written two ways gives two lease IDs: %q, %q", a.leaseID("op"), a2.leaseID("op"))
	}
	if id := a.leaseID("op"); len(id) != len("op-")+10 || id[:3] != "op-" {
		t.Errorf("lease ID %q, want op-<10 hex digits>", id)
	}
	if !slices.Equal(multi.keys, []string{"helmapp.io/shard", "tier"}) {
		t.Errorf("keys %v", multi.keys)
	}
	if got := a.labelsOf(map[string]string{"helmapp.io/shard": "a", "app": "web"}); len(got) != 1 || got["helmapp.io/shard"] != "a" {
		t.Errorf("labelsOf = %v, want only the shard key", got)
	}
}
