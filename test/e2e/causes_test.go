//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// waitHooked waits until cond holds for hooked/name.
func (e *env) waitHooked(name, what string, cond func(*nginx) bool) *nginx {
	e.t.Helper()
	var n *nginx
	e.eventually(name, "hooked/"+name+": "+what, func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(hookedGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n = &nginx{}
		if err := fromUnstructured(u, n); err != nil {
			return false, err.Error()
		}
		return cond(n), n.String()
	})
	return n
}

// The chart's workloads fail on the full local cluster in the ways they
// commonly do, all at once, in one namespace that enforces Pod Security
// "restricted" and has a ResourceQuota on the CPU requests of pods that
// make any (chart testdata/charts/causes, kind Hooked). Each resource's
// ResourcesReady and Ready are False with the class of the cause as their
// reason, and their message states the cause as the cluster does:
//
//   - a Deployment whose pod exceeds the quota: FailedCreate, "exceeded
//     quota"; the quota raised, the resource becomes Ready without any edit;
//   - a Deployment whose pod Pod Security refuses: FailedCreate, "violates
//     PodSecurity" (the controller's condition comes before the API
//     server's warning), and an APIWarning event at the install, "would
//     violate PodSecurity";
//   - a pod whose image cannot be pulled (kwok's ImagePullBackOff stage):
//     ImagePullBackOff, naming the image;
//   - a pod that crash-loops (kwok's CrashLoopBackOff stage): CrashLoopBackOff
//     with the restart count, the last termination's reason and exit code,
//     and nothing of its termination message;
//   - a claim of a StorageClass that does not exist (the chart's default,
//     so that the class's name is no value of the spec, which would be
//     redacted from the event's text): ClaimPending, quoting the claim's
//     ProvisioningFailed event;
//   - a Job whose pod fails: JobFailed, BackoffLimitExceeded, the pod's exit code;
//   - a Deployment whose pods are all fine: Ready, and the operator lists no
//     pod or event of it once it is Ready, a no-op reconcile included.
func TestNotReadyCauses(t *testing.T) {
	e := newEnv(t, "e2e-causes", watchOptions{hooked: true, hookedChart: "causes"})
	e.kubectl("label", "namespace", e.ns, "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest")
	e.apply("quota", "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: cpu-budget\nspec:\n  hard:\n    requests.cpu: 100m\n  scopes: [NotBestEffort]\n")

	e.applyHooked("quota", "  cpu: 500m\n")
	e.applyHooked("psa", "  restricted: false\n")
	e.applyHooked("pull", "  state: ImagePullBackOff\n  image: registry.example/no-such-image:0.1\n")
	e.applyHooked("crash", "  state: CrashLoopBackOff\n")
	e.applyHooked("claim", "  deployment: false\n  claim: true\n")
	e.applyHooked("job", "  deployment: false\n  failingJob: true\n")
	e.applyHooked("fine", "  replicas: 2\n")

	for _, tc := range []struct {
		name, reason string
		want         []string
		never        []string
	}{
		{"quota", "FailedCreate", []string{"Deployment quota: 0/1 replicas available", "FailedCreate: ", "exceeded quota: cpu-budget", "requests.cpu=500m"}, nil},
		{"psa", "FailedCreate", []string{"Deployment psa: 0/1 replicas available", "FailedCreate: ", `violates PodSecurity "restricted:latest"`}, nil},
		{"pull", "ImagePullBackOff", []string{"Deployment pull: 0/1 replicas available", ": container web: ImagePullBackOff: image registry.example/no-such-image:0.1"}, nil},
		{"crash", "CrashLoopBackOff", []string{"Deployment crash: 0/1 replicas available", ": container web: CrashLoopBackOff, restarted 5 times, last terminated with reason Error, exit code 2"},
			[]string{"the last lines of the container's log"}},
		{"claim", "ClaimPending", []string{"PersistentVolumeClaim claim-data: ", `ProvisioningFailed: storageclass.storage.k8s.io "no-such-class" not found`}, nil},
		{"job", "JobFailed", []string{"Job job-migrate: ", "Failed: BackoffLimitExceeded", "container migrate terminated with reason Error, exit code 1"},
			[]string{"the last lines of the container's log"}},
	} {
		n := e.waitHooked(tc.name, "ResourcesReady=False and Ready=False "+tc.reason, func(n *nginx) bool {
			rr, r := n.cond(typeResourcesReady), n.cond(typeReady)
			return n.is(typeResourcesReady, metav1.ConditionFalse) && rr.Reason == tc.reason &&
				n.is(typeReady, metav1.ConditionFalse) && r.Reason == tc.reason
		})
		t.Logf("%s: ResourcesReady=False %s: %s", tc.name, tc.reason, n.cond(typeResourcesReady).Message)
		for _, typ := range []string{typeResourcesReady, typeReady} {
			msg := n.cond(typ).Message
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					e.t.Errorf("%s: %s's message does not say %q: %s", tc.name, typ, w, msg)
				}
			}
			for _, w := range tc.never {
				if strings.Contains(msg, w) {
					e.t.Errorf("%s: %s's message holds the container's termination message: %s", tc.name, typ, msg)
				}
			}
		}
		for _, o := range n.Status.Resources.NotReady {
			for _, w := range tc.never {
				if strings.Contains(o.Message, w) {
					e.t.Errorf("%s: status.resources.notReady holds the container's termination message: %s", tc.name, o.Message)
				}
			}
		}
	}

	// The API server warned on the create of the privileged Deployment:
	// an APIWarning event on hooked/psa names it; none on hooked/quota,
	// whose pod template Pod Security admits.
	apiWarnings := func(ctx context.Context, name string) (string, error) {
		return e.tryKubectl("get", "events", "--field-selector", "involvedObject.kind=Hooked,involvedObject.name="+name+",reason=APIWarning",
			"-o", `jsonpath={range .items[*]}{.message}{"\n"}{end}`)
	}
	e.eventually("psa", "an APIWarning event naming Deployment psa", func(ctx context.Context) (bool, string) {
		out, err := apiWarnings(ctx, "psa")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, "Deployment psa") && strings.Contains(out, `would violate PodSecurity "restricted:latest"`), "APIWarning events: " + out
	})
	if out, err := apiWarnings(context.Background(), "quota"); err != nil || strings.TrimSpace(out) != "" {
		e.t.Errorf("hooked/quota, admitted by Pod Security, has APIWarning events %q (%v)", out, err)
	}

	// The quota raised: the ReplicaSet controller creates the pod, and the
	// resource becomes Ready with no edit of it.
	gen := e.waitHooked("quota", "the cause", func(n *nginx) bool { return true }).Metadata.Generation
	e.kubectl("patch", "resourcequota", "cpu-budget", "--type=merge", "-p", `{"spec":{"hard":{"requests.cpu":"1"}}}`)
	n := e.waitHooked("quota", "Ready=True once the quota is raised", func(n *nginx) bool {
		return n.is(typeReady, metav1.ConditionTrue) && n.is(typeResourcesReady, metav1.ConditionTrue)
	})
	if n.Metadata.Generation != gen {
		e.fatalf("hooked/quota changed generation %d -> %d: it was edited", gen, n.Metadata.Generation)
	}

	// The fine Deployment: Ready, no cause; once Ready, a reconcile that
	// finds it as it was (an annotation changed) lists no pod or event.
	n = e.waitHooked("fine", "Ready=True", func(n *nginx) bool {
		return n.is(typeReady, metav1.ConditionTrue) && n.cond(typeResourcesReady).Reason == reasonAllResourcesCurrent
	})
	uid := strings.TrimSpace(e.kubectl("get", "deployment", "fine", "-o", "jsonpath={.metadata.uid}"))
	readyAt := time.Now()
	e.kubectl("annotate", "hooked", "fine", "e2e.helmapp.io/note=no-op")
	// The reconcile of the annotation, and a margin for any lookup it could make.
	time.Sleep(3 * time.Second)
	for _, ev := range auditLog(t, e.ns) {
		if ev.at.Before(readyAt) || ev.verb != "list" {
			continue
		}
		if strings.Contains(ev.uri, "app%3Dfine") || strings.Contains(ev.uri, uid) {
			e.t.Errorf("the operator looked up a cause of the ready Deployment fine: %s %s at %s", ev.verb, ev.uri, ev.at)
		}
	}
}

// uriEvent is an audit event's verb, request URI and time.
type uriEvent struct {
	verb, uri string
	at        time.Time
}

// auditLog returns the verb, URI and time of the audit events of namespace ns.
func auditLog(t *testing.T, ns string) []uriEvent {
	t.Helper()
	f, err := os.Open(suite.cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []uriEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var ev struct {
			Verb           string    `json:"verb"`
			RequestURI     string    `json:"requestURI"`
			StageTimestamp time.Time `json:"stageTimestamp"`
			ObjectRef      struct {
				Namespace string `json:"namespace"`
			} `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if ev.ObjectRef.Namespace == ns {
			out = append(out, uriEvent{verb: ev.Verb, uri: ev.RequestURI, at: ev.StageTimestamp})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
