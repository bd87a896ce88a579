package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

const (
	benchNamespace     = "bench"
	unrelatedNamespace = "unrelated"
	benchKind          = "BenchApp"
	benchAPIVersion    = "bench.helmapp.io/v1alpha1"
)

func appName(i int) string { return fmt.Sprintf("app-%04d", i) }

func newApp(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": benchAPIVersion,
		"kind":       benchKind,
		"metadata":   map[string]any{"name": name, "namespace": benchNamespace},
		"spec":       map[string]any{"value": "initial"},
	}}
	return u
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
// done, if not nil, is incremented after each f.
func parallel(outer context.Context, n, workers int, done *atomic.Int64, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(outer)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				if done != nil {
					done.Add(1)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = outer.Err()
	}
	return first
}

func createNamespaces(ctx context.Context, cs kubernetes.Interface, names ...string) error {
	for _, n := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", n, err)
		}
	}
	return nil
}

func createApps(ctx context.Context, dyn dynamic.Interface, n, workers int, done *atomic.Int64) error {
	return parallel(ctx, n, workers, done, func(ctx context.Context, i int) error {
		_, err := dyn.Resource(benchGVR).Namespace(benchNamespace).Create(ctx, newApp(appName(i)), metav1.CreateOptions{})
		return err
	})
}

// createUnrelatedSecrets creates n Secrets of size random bytes that no
// operator has anything to do with.
func createUnrelatedSecrets(ctx context.Context, cs kubernetes.Interface, n, size, workers int) error {
	return parallel(ctx, n, workers, nil, func(ctx context.Context, i int) error {
		data := make([]byte, size)
		_, _ = rand.Read(data)
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%05d", i), Namespace: unrelatedNamespace},
			Data:       map[string][]byte{"data": data},
		}
		_, err := cs.CoreV1().Secrets(unrelatedNamespace).Create(ctx, s, metav1.CreateOptions{})
		return err
	})
}
