package readiness

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Reasons of the ResourcesReady condition, from the status contract.
const (
	ReasonAllCurrent = status.ReasonAllResourcesCurrent
	ReasonFailed     = status.ReasonResourcesFailed
	ReasonNotFound   = status.ReasonResourcesNotFound
	ReasonInProgress = status.ReasonResourcesInProgress
	ReasonUnreadable = status.ReasonResourcesUnreadable
)

// MaxNotReady bounds the objects listed in Summary.NotReady.
const MaxNotReady = 10

// maxNamed is how many not-ready objects the summary message names.
const maxNamed = 3

// maxNamedLength bounds each named object's part of the message, so that three
// of them and the "; and N more" tail fit in status.MaxMessageLength.
const maxNamedLength = (status.MaxMessageLength - 64) / maxNamed

// NotReadyObject is one object of the release that is not Current, as listed
// in status.resources.notReady.
type NotReadyObject = status.NotReadyObject

// Summary is the readiness of a release's objects as a whole.
type Summary struct {
	// Total counts the objects of the release; Ready those that are Current.
	Total, Ready int
	// NotReady lists at most MaxNotReady objects that are not Current, most
	// severe first (see Summarize).
	NotReady []NotReadyObject
	// Warnings lists at most MaxNotReady advisory objects (Result.Advisory)
	// that are not Current, in the same order: reported, not counted.
	Warnings []NotReadyObject
	// Reason and Message are those of the ResourcesReady condition.
	Reason, Message string
	// AllReady is true when every object is Current; ResourcesReady is then True.
	AllReady bool
	// Unreadable is the first object that could not be read, "Kind name:
	// reading it failed: <error>"; empty when every object was read. The
	// reason is then ResourceReadError and ResourcesReady Unknown: nothing
	// is known about that object, so no verdict on the release is given.
	Unreadable string
	// RecheckAt is the earliest time a not-ready object's cause is due to be
	// looked up again (Result.RecheckAt); zero when none is.
	RecheckAt time.Time
}

// Summarize turns the results of Check into the ResourcesReady condition's
// verdict and the status.resources counts. It is pure.
//
// Reasons, first that applies: ResourceReadError when an object could not be
// read; the class of the cause (Result.Reason: FailedCreate,
// ImagePullBackOff, ...) of the first object listed that has one, among
// the most severe (Failed, else NotFound, else the others); Failed
// when any object is Failed, NotFound when any is missing,
// InProgress otherwise while any is not Current (InProgress, Terminating, or
// Unknown because kstatus could not judge it: none of these says the release
// is broken, and the next check may settle them), and
// AllResourcesCurrent when all are Current, a release without objects included.
//
// Not-ready objects are ordered Failed, NotFound, then the rest, each group by
// kind, namespace and name. The message names the first three,
// "Deployment web: 1/3 replicas available; Service db: not found; and 2 more",
// and is at most status.MaxMessageLength bytes on one line.
//
// An advisory object (Result.Advisory) that is not Current is reported, not
// counted: it is in Warnings, not in Total, Ready nor NotReady, and never
// decides the reason. When every counted object is Current the message
// names the first warning: "All 3 resources are Current; 1 warning: Service
// web: no load-balancer address yet".
func Summarize(results []Result) Summary {
	var s Summary
	var notReady, warnings []Result
	for _, r := range results {
		switch {
		case r.Status == kstatus.CurrentStatus:
			s.Ready++
		case r.Advisory:
			warnings = append(warnings, r)
			continue
		default:
			notReady = append(notReady, r)
		}
		s.Total++
	}
	sortResults(warnings)
	s.Warnings = listed(warnings)
	if len(notReady) == 0 {
		s.AllReady, s.Reason = true, ReasonAllCurrent
		s.Message = fmt.Sprintf("All %d resources are Current", s.Total)
		if s.Total == 0 {
			s.Message = "The release has no resources"
		}
		if len(warnings) > 0 {
			s.Message = status.Bound(s.Message+"; "+warningsPart(warnings), status.MaxMessageLength)
		}
		return s
	}

	sortResults(notReady)
	for _, r := range notReady {
		if r.Unreadable {
			s.Unreadable = status.Bound(r.Ref.Kind+" "+r.Ref.Name+": "+r.Message, maxNamedLength)
			break
		}
	}
	switch severity(notReady[0].Status) {
	case 0:
		s.Reason = ReasonFailed
	case 1:
		s.Reason = ReasonNotFound
	default:
		s.Reason = ReasonInProgress
	}
	for _, r := range notReady {
		if severity(r.Status) != severity(notReady[0].Status) {
			break
		}
		if r.Reason != "" {
			s.Reason = r.Reason
			break
		}
	}
	for _, r := range notReady {
		if !r.RecheckAt.IsZero() && (s.RecheckAt.IsZero() || r.RecheckAt.Before(s.RecheckAt)) {
			s.RecheckAt = r.RecheckAt
		}
	}

	s.NotReady = listed(notReady)

	parts := make([]string, 0, maxNamed+1)
	for _, r := range notReady[:min(len(notReady), maxNamed)] {
		msg := r.Message
		if msg == "" {
			msg = string(r.Status)
		}
		parts = append(parts, status.Bound(r.Ref.Kind+" "+r.Ref.Name+": "+msg, maxNamedLength))
	}
	if more := len(notReady) - maxNamed; more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	s.Message = status.Bound(strings.Join(parts, "; "), status.MaxMessageLength)
	if s.Unreadable != "" {
		s.Reason = ReasonUnreadable
		s.Message = s.Unreadable
		if more := len(notReady) - 1; more > 0 {
			s.Message += fmt.Sprintf("; and %d more not ready", more)
		}
	}
	return s
}

// sortResults orders rs Failed, NotFound, then the rest, each group by
// kind, namespace, name and apiVersion.
func sortResults(rs []Result) {
	slices.SortFunc(rs, func(a, b Result) int {
		return cmp.Or(
			cmp.Compare(severity(a.Status), severity(b.Status)),
			cmp.Compare(a.Ref.Kind, b.Ref.Kind),
			cmp.Compare(a.Ref.Namespace, b.Ref.Namespace),
			cmp.Compare(a.Ref.Name, b.Ref.Name),
			cmp.Compare(a.Ref.APIVersion, b.Ref.APIVersion),
		)
	})
}

// listed is the first MaxNotReady of rs as the status lists them; nil when
// rs is empty.
func listed(rs []Result) []NotReadyObject {
	var out []NotReadyObject
	for _, r := range rs[:min(len(rs), MaxNotReady)] {
		out = append(out, NotReadyObject{
			APIVersion: r.Ref.APIVersion, Kind: r.Ref.Kind, Namespace: r.Ref.Namespace, Name: r.Ref.Name,
			Status:  string(r.Status),
			Message: status.Bound(r.Message, MaxObjectMessageLength),
		})
	}
	return out
}

// warningsPart is the message's tail for warnings, sorted: "1 warning:
// Service web: no load-balancer address yet", "2 warnings: Service web:
// ...; and 1 more".
func warningsPart(warnings []Result) string {
	w := warnings[0]
	msg := w.Message
	if msg == "" {
		msg = string(w.Status)
	}
	part := status.Bound(w.Ref.Kind+" "+w.Ref.Name+": "+msg, maxNamedLength)
	if len(warnings) == 1 {
		return "1 warning: " + part
	}
	return fmt.Sprintf("%d warnings: %s; and %d more", len(warnings), part, len(warnings)-1)
}

// severity orders statuses for the reason and the listing: Failed, then
// NotFound, then every other not-Current status.
func severity(st kstatus.Status) int {
	switch st {
	case kstatus.FailedStatus:
		return 0
	case kstatus.NotFoundStatus:
		return 1
	default:
		return 2
	}
}
