package operator

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/release"
)

// DigestKeySecret is the Secret, in the operator's namespace, that holds the
// key of the values digests the statuses publish (release.DigestKey), under
// DigestKeyField. Every replica and shard of one operator shares it.
const (
	DigestKeySecret = "helm-app-operator-digest-key"
	DigestKeyField  = "key"
)

// serviceAccountNamespaceFile is where a pod finds its own namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// operatorNamespace is the operator's own namespace: Config.OperatorNamespace
// (POD_NAMESPACE), else the leader election namespace, else the pod's
// namespace; outside a cluster with neither set, "default" (as kubectl's),
// so that a process run by hand keeps its key across restarts too.
func operatorNamespace(c Config, readFile func(string) ([]byte, error)) string {
	switch {
	case c.OperatorNamespace != "":
		return c.OperatorNamespace
	case c.LeaderElectionNamespace != "":
		return c.LeaderElectionNamespace
	}
	if b, err := readFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return metav1.NamespaceDefault
}

// digestKey reads the key of the values digests from DigestKeySecret in ns,
// making the Secret when it is absent. Replicas or shards starting at once
// race to create it: the loser reads what the winner made, so all digest
// with one key. A new key (the Secret deleted) changes every digest: each
// status is rewritten once, no release is upgraded (the decisions do not
// use the published digest).
func digestKey(ctx context.Context, cl client.Client, ns string, log logr.Logger) (release.DigestKey, error) {
	key := client.ObjectKey{Namespace: ns, Name: DigestKeySecret}
	read := func() (release.DigestKey, error) {
		var s corev1.Secret
		if err := cl.Get(ctx, key, &s); err != nil {
			return nil, err
		}
		k := s.Data[DigestKeyField]
		if len(k) < release.DigestKeySize {
			return nil, fmt.Errorf("the Secret %s/%s holds no %q of %d bytes or more: delete it and the operator makes a new key", ns, DigestKeySecret, DigestKeyField, release.DigestKeySize)
		}
		return k, nil
	}
	k, err := read()
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return nil, fmt.Errorf("reading the values digest key: %w", err)
		}
		return k, nil
	}
	if k, err = release.NewDigestKey(); err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DigestKeySecret,
			Labels: map[string]string{"app.kubernetes.io/name": "helm-app-operator"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{DigestKeyField: k},
	}
	switch err := cl.Create(ctx, s); {
	case err == nil:
		log.Info("made the values digest key", "secret", ns+"/"+DigestKeySecret)
		return k, nil
	case apierrors.IsAlreadyExists(err):
		// Another replica or shard made it first: use its key.
		if k, err = read(); err != nil {
			return nil, fmt.Errorf("reading the values digest key: %w", err)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("making the values digest key Secret %s/%s: %w", ns, DigestKeySecret, err)
	}
}

// newDigestKey is digestKey in the operator's namespace, read or made
// before the manager starts, with a client over the manager's HTTP client
// and REST mapper: a client of its own would read discovery (/api, /apis)
// once more at every start.
func newDigestKey(mgr interface {
	GetConfig() *rest.Config
	GetScheme() *runtime.Scheme
	GetHTTPClient() *http.Client
	GetRESTMapper() meta.RESTMapper
}, c Config, log logr.Logger) (release.DigestKey, error) {
	cl, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return digestKey(ctx, cl, operatorNamespace(c, os.ReadFile), log)
}
