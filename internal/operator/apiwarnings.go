package operator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/readiness"
)

// maxWarnedBody bounds the request body read to name the object of a create
// that drew a warning.
const maxWarnedBody = 1 << 20

// recordWarnings wraps the REST configuration of each resource's Helm
// actions (next) so that the API server's warnings (`Warning: 299 - "..."`
// headers) on the writes of the resource's objects — a create, update or
// patch that succeeded — are kept in warned for that resource, with the
// object they are about: the object is named by the request's path, and
// for a create by the body the operator sent. It costs no request: only the
// responses are read, and the kinds are mapped by the mapper Helm has just
// used for the same kinds.
func recordWarnings(next helmclient.ObjectToRestConfigMapper, warned *readiness.Warnings, mapper meta.RESTMapper) helmclient.ObjectToRestConfigMapper {
	return func(ctx context.Context, obj client.Object, base *rest.Config) (*rest.Config, error) {
		cfg, err := next(ctx, obj, base)
		if err != nil || warned == nil || obj.GetUID() == "" {
			return cfg, err
		}
		owner := obj.GetUID()
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return &warningRecorder{next: rt, record: func(o readiness.WarnedObject, texts []string) { warned.Record(owner, o, texts) },
				has: func() bool { return warned.Has(owner) }, mapper: mapper}
		})
		return cfg, nil
	}
}

// warningRecorder is the transport of one resource's Helm actions.
type warningRecorder struct {
	next   http.RoundTripper
	record func(readiness.WarnedObject, []string)
	// has tells whether warnings are kept for the resource: only then is a
	// write without warnings looked at (it clears its object's).
	has    func() bool
	mapper meta.RESTMapper
}

func (t *warningRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, err
	}
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return resp, err
	}
	if req.URL.Query().Has("dryRun") {
		return resp, err
	}
	var texts []string
	if hs := resp.Header.Values("Warning"); len(hs) > 0 {
		parsed, _ := utilnet.ParseWarningHeaders(hs)
		for _, w := range parsed {
			texts = append(texts, w.Text)
		}
	}
	if len(texts) == 0 && !t.has() {
		return resp, err
	}
	if o, ok := t.object(req); ok {
		t.record(o, texts)
	}
	return resp, err
}

// object names the object a write is about, from its path
// (/api/v1/namespaces/NS/RESOURCE/NAME, /apis/GROUP/VERSION/RESOURCE/NAME)
// and, for a create, its body.
func (t *warningRecorder) object(req *http.Request) (readiness.WarnedObject, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		gv, parts = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return readiness.WarnedObject{}, false
	}
	var o readiness.WarnedObject
	if len(parts) >= 3 && parts[0] == "namespaces" {
		o.Namespace, parts = parts[1], parts[2:]
	}
	resource := parts[0]
	if len(parts) >= 2 {
		o.Name = parts[1]
	}
	if len(parts) > 2 {
		return readiness.WarnedObject{}, false // a subresource: not the object's apply
	}
	var body struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name         string `json:"name"`
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	if req.Method == http.MethodPost && req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			_ = json.NewDecoder(io.LimitReader(rc, maxWarnedBody)).Decode(&body)
			_ = rc.Close()
			o.Name = body.Metadata.Name
		}
	}
	o.Group, o.Kind = gv.Group, body.Kind
	if o.Kind == "" {
		gvk, err := t.mapper.KindFor(gv.WithResource(resource))
		if err != nil {
			return readiness.WarnedObject{}, false
		}
		o.Kind = gvk.Kind
	}
	return o, true
}
