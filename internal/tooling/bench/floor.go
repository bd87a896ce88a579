package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// floorWrites is what an ideal operator must write per resource, the
// resource's own create included: the resource, its ConfigMap and Secret,
// Helm's release Secret (created pending, then updated deployed) and one
// status write.
const floorWrites = 6

// releaseBytes approximates a stored release of the bench chart (gzip'd
// JSON, base64'd by Helm).
const releaseBytes = 3 << 10

// floorRun issues floorWrites per resource for n resources from workers
// goroutines and returns how long that took and what it cost (m). One resource is written first,
// untimed, so that the API server's first write of each kind (storage and
// watch cache set-up) is not counted: the operators' runs start on a server
// that has served their start-up.
func floorRun(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, m *meter, n, workers int) (time.Duration, Cost, error) {
	if err := floorWrite(ctx, cs, dyn, "warm-up"); err != nil {
		return 0, Cost{}, err
	}
	before, err := m.read(ctx, false)
	if err != nil {
		return 0, Cost{}, err
	}
	start := time.Now()
	if err := parallel(ctx, n, workers, nil, func(ctx context.Context, i int) error {
		return floorWrite(ctx, cs, dyn, appName(i))
	}); err != nil {
		return 0, Cost{}, err
	}
	d := time.Since(start)
	after, err := m.read(ctx, true)
	return d, after.since(before), err
}

// floorWrite makes the floorWrites of one resource.
func floorWrite(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, name string) error {
	app, err := dyn.Resource(benchGVR).Namespace(benchNamespace).Create(ctx, newApp(name), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-config", Namespace: benchNamespace},
		Data: map[string]string{"value": "initial"}}
	if _, err := cs.CoreV1().ConfigMaps(benchNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-secret", Namespace: benchNamespace},
		StringData: map[string]string{"value": "initial"}}
	if _, err := cs.CoreV1().Secrets(benchNamespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return err
	}
	payload := make([]byte, releaseBytes)
	_, _ = rand.Read(payload)
	rel := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1." + name + ".v1", Namespace: benchNamespace,
			Labels: map[string]string{"owner": "helm", "name": name, "status": "pending-install", "version": "1"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": payload},
	}
	created, err := cs.CoreV1().Secrets(benchNamespace).Create(ctx, rel, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created.Labels["status"] = "deployed"
	if _, err := cs.CoreV1().Secrets(benchNamespace).Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	cond := map[string]any{"type": "Deployed", "status": "True", "reason": "InstallSuccessful",
		"message": "revision 1 deployed", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if err := unstructured.SetNestedSlice(app.Object, []any{cond}, "status", "conditions"); err != nil {
		return err
	}
	if _, err := dyn.Resource(benchGVR).Namespace(benchNamespace).UpdateStatus(ctx, app, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status of %s: %w", name, err)
	}
	return nil
}
