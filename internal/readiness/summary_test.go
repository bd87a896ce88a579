package readiness

import (
	"fmt"
	"strings"
	"testing"

	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/helmapp/helm-app-operator/internal/status"
)

func result(apiVersion, kind, name string, st kstatus.Status, msg string) Result {
	return Result{Ref: ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: "ns", Name: name}, Status: st, Message: msg}
}

var (
	currentDeploy = result("apps/v1", "Deployment", "web", kstatus.CurrentStatus, "Deployment is available. Replicas: 3")
	currentSvc    = result("v1", "Service", "web", kstatus.CurrentStatus, "Service is ready")
	currentCM     = result("v1", "ConfigMap", "web-page", kstatus.CurrentStatus, "Resource is always ready")
	slowDeploy    = result("apps/v1", "Deployment", "web", kstatus.InProgressStatus, "1/3 replicas available")
	stuckDeploy   = result("apps/v1", "Deployment", "web", kstatus.FailedStatus, "1/3 replicas available; progress deadline exceeded")
	goneSvc       = result("v1", "Service", "web", kstatus.NotFoundStatus, "not found")
	// kstatus has no rules for a Widget: without conditions it is Current.
	widget = result("example.com/v1", "Widget", "w", kstatus.CurrentStatus, "Resource is current")
)

func TestSummarize(t *testing.T) {
	many := []Result{currentCM}
	for i := range 12 {
		many = append(many, result("v1", "ConfigMap", fmt.Sprintf("cm-%02d", 11-i), kstatus.InProgressStatus, "waiting"))
	}

	tests := []struct {
		name    string
		results []Result
		want    Summary
		// wantNotReady is "Kind name Status" for each listed object, in order.
		wantNotReady []string
	}{{
		name:    "all current",
		results: []Result{currentDeploy, currentSvc, currentCM},
		want:    Summary{Total: 3, Ready: 3, AllReady: true, Reason: ReasonAllCurrent, Message: "All 3 resources are Current"},
	}, {
		name:    "no objects",
		results: nil,
		want:    Summary{AllReady: true, Reason: ReasonAllCurrent, Message: "The release has no resources"},
	}, {
		name:    "a kind kstatus does not know counts as ready",
		results: []Result{currentDeploy, widget},
		want:    Summary{Total: 2, Ready: 2, AllReady: true, Reason: ReasonAllCurrent, Message: "All 2 resources are Current"},
	}, {
		name:         "a deployment in progress",
		results:      []Result{slowDeploy, currentSvc, currentCM},
		want:         Summary{Total: 3, Ready: 2, Reason: ReasonInProgress, Message: "Deployment web: 1/3 replicas available"},
		wantNotReady: []string{"Deployment web InProgress"},
	}, {
		name:         "failed wins over not found and in progress, and is named first",
		results:      []Result{result("v1", "ConfigMap", "a", kstatus.InProgressStatus, "waiting"), goneSvc, stuckDeploy},
		want:         Summary{Total: 3, Reason: ReasonFailed, Message: "Deployment web: 1/3 replicas available; progress deadline exceeded; Service web: not found; ConfigMap a: waiting"},
		wantNotReady: []string{"Deployment web Failed", "Service web NotFound", "ConfigMap a InProgress"},
	}, {
		name:         "not found wins over in progress",
		results:      []Result{slowDeploy, goneSvc, currentCM},
		want:         Summary{Total: 3, Ready: 1, Reason: ReasonNotFound, Message: "Service web: not found; Deployment web: 1/3 replicas available"},
		wantNotReady: []string{"Service web NotFound", "Deployment web InProgress"},
	}, {
		name: "terminating and unknown count as in progress",
		results: []Result{
			result("v1", "Secret", "s", kstatus.UnknownStatus, "reading it failed: forbidden"),
			result("v1", "ConfigMap", "c", kstatus.TerminatingStatus, "Resource scheduled for deletion"),
		},
		want:         Summary{Total: 2, Reason: ReasonInProgress, Message: "ConfigMap c: Resource scheduled for deletion; Secret s: reading it failed: forbidden"},
		wantNotReady: []string{"ConfigMap c Terminating", "Secret s Unknown"},
	}, {
		name:    "more than ten not ready: three named, ten listed, sorted by name",
		results: many,
		want: Summary{Total: 13, Ready: 1, Reason: ReasonInProgress,
			Message: "ConfigMap cm-00: waiting; ConfigMap cm-01: waiting; ConfigMap cm-02: waiting; and 9 more"},
		wantNotReady: []string{
			"ConfigMap cm-00 InProgress", "ConfigMap cm-01 InProgress", "ConfigMap cm-02 InProgress",
			"ConfigMap cm-03 InProgress", "ConfigMap cm-04 InProgress", "ConfigMap cm-05 InProgress",
			"ConfigMap cm-06 InProgress", "ConfigMap cm-07 InProgress", "ConfigMap cm-08 InProgress",
			"ConfigMap cm-09 InProgress",
		},
	}, {
		name:         "an empty message is replaced by the status",
		results:      []Result{result("v1", "Service", "web", kstatus.InProgressStatus, "")},
		want:         Summary{Total: 1, Reason: ReasonInProgress, Message: "Service web: InProgress"},
		wantNotReady: []string{"Service web InProgress"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(tt.results)
			if got.Total != tt.want.Total || got.Ready != tt.want.Ready || got.AllReady != tt.want.AllReady ||
				got.Reason != tt.want.Reason || got.Message != tt.want.Message {
				t.Errorf("Summarize() = total %d ready %d allReady %t reason %q message %q\nwant total %d ready %d allReady %t reason %q message %q",
					got.Total, got.Ready, got.AllReady, got.Reason, got.Message,
					tt.want.Total, tt.want.Ready, tt.want.AllReady, tt.want.Reason, tt.want.Message)
			}
			var listed []string
			for _, o := range got.NotReady {
				listed = append(listed, o.Kind+" "+o.Name+" "+o.Status)
				if o.APIVersion == "" || o.Namespace != "ns" {
					t.Errorf("not-ready object %+v lacks its apiVersion or namespace", o)
				}
			}
			if strings.Join(listed, ", ") != strings.Join(tt.wantNotReady, ", ") {
				t.Errorf("NotReady = %v\nwant %v", listed, tt.wantNotReady)
			}
		})
	}
}

func TestSummarizeBoundsMessages(t *testing.T) {
	long := strings.Repeat("x", 5000) + "\nsecond line"
	var results []Result
	for i := range 5 {
		results = append(results, result("apps/v1", "Deployment", fmt.Sprintf("d%d", i), kstatus.InProgressStatus, long))
	}
	got := Summarize(results)
	if len(got.Message) > status.MaxMessageLength || strings.Contains(got.Message, "\n") {
		t.Errorf("message is %d bytes or has a newline", len(got.Message))
	}
	if !strings.HasSuffix(got.Message, "; and 2 more") {
		t.Errorf("the count of the rest was cut: ...%s", got.Message[len(got.Message)-40:])
	}
	for _, o := range got.NotReady {
		if len(o.Message) > MaxObjectMessageLength || strings.Contains(o.Message, "\n") {
			t.Errorf("%s's message is %d bytes or has a newline", o.Name, len(o.Message))
		}
	}
}

func TestSummarizeDoesNotReorderItsInput(t *testing.T) {
	in := []Result{slowDeploy, goneSvc}
	Summarize(in)
	if in[0] != slowDeploy || in[1] != goneSvc {
		t.Errorf("Summarize reordered its argument: %v", in)
	}
}

// An object that could not be read gives ResourceReadError, naming it and
// the error, whatever the others say: nothing is known about it.
func TestSummarizeUnreadable(t *testing.T) {
	unreadable := objectResult(ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "web-page"}, nil,
		fmt.Errorf(`configmaps "web-page" is forbidden`), status.Redactor{})
	for _, tt := range []struct {
		name    string
		results []Result
		reason  string
		message string
	}{
		{"alone", []Result{currentDeploy, unreadable}, ReasonUnreadable,
			`ConfigMap web-page: reading it failed: configmaps "web-page" is forbidden`},
		{"with a failed object", []Result{stuckDeploy, unreadable}, ReasonUnreadable,
			`ConfigMap web-page: reading it failed: configmaps "web-page" is forbidden; and 1 more not ready`},
		{"kstatus cannot judge", []Result{currentDeploy, result("v1", "ConfigMap", "x", kstatus.UnknownStatus, "its status could not be computed")},
			ReasonInProgress, "ConfigMap x: its status could not be computed"},
	} {
		s := Summarize(tt.results)
		if s.Reason != tt.reason || s.Message != tt.message || s.AllReady {
			t.Errorf("%s: Summarize = %s %q (all ready %v), want %s %q", tt.name, s.Reason, s.Message, s.AllReady, tt.reason, tt.message)
		}
		if (tt.reason == ReasonUnreadable) != (s.Unreadable != "") {
			t.Errorf("%s: Unreadable = %q", tt.name, s.Unreadable)
		}
	}
}

// An advisory object that is not Current is reported, not counted: a
// release whose counted objects are all Current is ready, its message
// names the warning, and the warning never decides the reason.
func TestSummarizeWarnings(t *testing.T) {
	lb := result("v1", "Service", "lb", kstatus.InProgressStatus, "no load-balancer address yet")
	lb.Advisory, lb.Reason = true, status.ReasonNoAddress
	ing := result("networking.k8s.io/v1", "Ingress", "web", kstatus.InProgressStatus, "no load-balancer address yet")
	ing.Advisory, ing.Reason = true, status.ReasonNoAddress
	currentAdvisory := currentSvc
	currentAdvisory.Advisory = true

	s := Summarize([]Result{currentDeploy, lb, currentCM})
	want := "All 2 resources are Current; 1 warning: Service lb: no load-balancer address yet"
	if !s.AllReady || s.Total != 2 || s.Ready != 2 || s.Reason != ReasonAllCurrent || s.Message != want || len(s.NotReady) != 0 {
		t.Errorf("one warning: %+v\nwant ready, 2/2, message %q", s, want)
	}
	if len(s.Warnings) != 1 || s.Warnings[0].Name != "lb" || s.Warnings[0].Status != "InProgress" || s.Warnings[0].Message != "no load-balancer address yet" {
		t.Errorf("Warnings = %+v", s.Warnings)
	}

	s = Summarize([]Result{lb, ing, currentAdvisory})
	want = "All 1 resources are Current; 2 warnings: Ingress web: no load-balancer address yet; and 1 more"
	if !s.AllReady || s.Total != 1 || s.Ready != 1 || s.Message != want || len(s.Warnings) != 2 || s.Warnings[0].Kind != "Ingress" {
		t.Errorf("two warnings: %+v\nwant ready, 1/1 (a Current advisory object counts), message %q, Ingress first", s, want)
	}

	s = Summarize([]Result{slowDeploy, lb})
	if s.AllReady || s.Total != 1 || s.Reason != ReasonInProgress || s.Message != "Deployment web: 1/3 replicas available" || len(s.Warnings) != 1 {
		t.Errorf("a counted object not ready: %+v\nwant reason InProgress from the Deployment, its message unchanged, the warning listed", s)
	}

	many := []Result{currentCM}
	for i := range 12 {
		w := result("v1", "Service", fmt.Sprintf("lb-%02d", i), kstatus.InProgressStatus, "no load-balancer address yet")
		w.Advisory = true
		many = append(many, w)
	}
	if s = Summarize(many); len(s.Warnings) != MaxNotReady || !strings.Contains(s.Message, "12 warnings: Service lb-00") {
		t.Errorf("12 warnings: %d listed, message %q; want %d listed, 12 counted", len(s.Warnings), s.Message, MaxNotReady)
	}
}
