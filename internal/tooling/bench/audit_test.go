package bench

import (
	"strings"
	"testing"
	"time"
)

const auditSample = `{"kind":"Event","level":"Metadata","auditID":"r1","stage":"RequestReceived","verb":"get","requestURI":"/api/v1/namespaces/bench/secrets/a","user":{"username":"bench-ours"},"objectRef":{"resource":"secrets","namespace":"bench","name":"a","apiVersion":"v1"},"requestReceivedTimestamp":"2026-12-01T10:00:00.000000Z"}
{"kind":"Event","level":"Metadata","auditID":"r1","stage":"ResponseComplete","verb":"get","requestURI":"/api/v1/namespaces/bench/secrets/a","user":{"username":"bench-ours"},"objectRef":{"resource":"secrets","namespace":"bench","name":"a","apiVersion":"v1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:00.000000Z"}
{"kind":"Event","level":"Metadata","auditID":"r2","stage":"ResponseComplete","verb":"patch","requestURI":"/apis/bench.helmapp.io/v1alpha1/namespaces/bench/benchapps/x/status","user":{"username":"bench-ours"},"objectRef":{"resource":"benchapps","subresource":"status","namespace":"bench","name":"x"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:01.000000Z"}
{"kind":"Event","level":"Metadata","auditID":"r3","stage":"ResponseComplete","verb":"get","requestURI":"/apis/apps/v1?timeout=32s","user":{"username":"bench-ours"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:02.000000Z"}
{"kind":"Event","level":"Metadata","auditID":"r4","stage":"ResponseComplete","verb":"get","requestURI":"/openapi/v3/api/v1","user":{"username":"bench-ours"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:03.000000Z"}
{"kind":"Event","level":"Metadata","auditID":"r5","stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/bench/configmaps","user":{"username":"admin"},"objectRef":{"resource":"configmaps","namespace":"bench"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-12-01T10:00:04.000000Z"}
{"kind":"Event","level":"Metadata","auditID":"r6","stage":"ResponseComplete","verb":"get","requestURI":"/version","user":{"username":"bench-ours"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:05.000000Z"}
{"kind":"Event","level":"Metadata","auditID":"w1","stage":"ResponseStarted","verb":"watch","requestURI":"/apis/bench.helmapp.io/v1alpha1/benchapps?watch=true","user":{"username":"bench-ours"},"objectRef":{"resource":"benchapps"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:06.000000Z"}
{"kind":"Event","level":"Metadata","auditID":"w1","stage":"ResponseComplete","verb":"watch","requestURI":"/apis/bench.helmapp.io/v1alpha1/benchapps?watch=true","user":{"username":"bench-ours"},"objectRef":{"resource":"benchapps"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:06.000000Z"}
{"kind":"Event","stage":"ResponseCompl`

func at(sec int) time.Time { return time.Date(2026, 12, 1, 10, 0, sec, 0, time.UTC) }

func TestParseAuditAndCount(t *testing.T) {
	evs, err := ParseAudit(strings.NewReader(auditSample), nil)
	if err != nil {
		t.Fatal(err)
	}
	// RequestReceived is skipped, the watch counted once when it started,
	// the torn last line ignored.
	if len(evs) != 7 {
		t.Fatalf("parsed %d events, want 7: %+v", len(evs), evs)
	}
	wantKeys := []string{"get secrets", "patch benchapps/status", "get discovery", "get openapi", "create configmaps", "get discovery", "watch benchapps"}
	for i, e := range evs {
		if e.Key() != wantKeys[i] {
			t.Errorf("event %d key %q, want %q", i, e.Key(), wantKeys[i])
		}
	}
	if evs[0].Code != 200 || evs[0].Name != "a" || evs[0].Namespace != "bench" || !evs[0].Received.Equal(at(0)) {
		t.Errorf("first event %+v", evs[0])
	}

	all := Count(evs, "bench-ours", at(0), at(10))
	if evs[6].Stage != "ResponseStarted" {
		t.Errorf("the watch was counted at %s, want ResponseStarted", evs[6].Stage)
	}
	if all.Requests != 6 || all.Writes != 1 || all.StatusWrites(benchResource) != 1 || all.Sum("get discovery") != 2 {
		t.Errorf("Count for bench-ours = %+v", all)
	}
	// The window is [from, to): the event at 1s is in [1s, 3s), the one at 3s is not.
	win := Count(evs, "bench-ours", at(1), at(3))
	if win.Requests != 2 || win.ByKey["patch benchapps/status"] != 1 || win.ByKey["get discovery"] != 1 {
		t.Errorf("Count in [1s, 3s) = %+v", win)
	}
	if admin := Count(evs, "admin", at(0), at(10)); admin.Requests != 1 || admin.Writes != 1 {
		t.Errorf("Count for admin = %+v", admin)
	}
	if got := LastRequest(evs, "bench-ours"); !got.Equal(at(6)) {
		t.Errorf("LastRequest = %v, want %v", got, at(6))
	}
}

// On a growing log, a request seen in one read is not counted again in the
// next (a watch's ResponseComplete arrives long after its ResponseStarted).
func TestParseAuditAcrossReads(t *testing.T) {
	lines := strings.SplitAfter(auditSample, "\n")
	seen := map[string]bool{}
	first, err := ParseAudit(strings.NewReader(strings.Join(lines[:8], "")), seen)
	if err != nil {
		t.Fatal(err)
	}
	second, err := ParseAudit(strings.NewReader(strings.Join(lines[8:], "")), seen)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 7 || len(second) != 0 {
		t.Errorf("first read %d events, second %d; want 7 and 0", len(first), len(second))
	}
}

func TestParseAuditRejectsAMalformedCompleteLine(t *testing.T) {
	if _, err := ParseAudit(strings.NewReader("{\"stage\":\n{}\n"), nil); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("ParseAudit error = %v, want one naming line 1", err)
	}
}

func TestIsWrite(t *testing.T) {
	for verb, want := range map[string]bool{"create": true, "update": true, "patch": true, "delete": true,
		"deletecollection": true, "get": false, "list": false, "watch": false} {
		if IsWrite(verb) != want {
			t.Errorf("IsWrite(%q) = %v, want %v", verb, !want, want)
		}
	}
}
