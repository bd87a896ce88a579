package operator

import (
	"container/list"
	"sync"
)

// maxIdentities bounds what the operator keeps per identity (a
// ServiceAccount a resource's annotation names): the clients built to act
// as it and to review its access. The names come from annotations any
// tenant writes, before anything checks that the ServiceAccount exists, so
// what is kept of them must not grow with every name tried; past the bound
// the identity used least recently is dropped (and built again if it comes
// back).
const maxIdentities = 256

// bounded is a map of at most max entries that drops the entry used least
// recently when a new one would exceed it. It is safe for concurrent use.
type bounded[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *boundedEntry[K, V], most recently used first
	byKey map[K]*list.Element
}

type boundedEntry[K comparable, V any] struct {
	key K
	val V
}

func newBounded[K comparable, V any](max int) *bounded[K, V] {
	return &bounded[K, V]{max: max, order: list.New(), byKey: map[K]*list.Element{}}
}

// get returns the value of key, and marks it used.
func (b *bounded[K, V]) get(key K) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el, ok := b.byKey[key]; ok {
		b.order.MoveToFront(el)
		return el.Value.(*boundedEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put sets the value of key, dropping the least recently used entry if the
// map is full.
func (b *bounded[K, V]) put(key K, val V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el, ok := b.byKey[key]; ok {
		el.Value.(*boundedEntry[K, V]).val = val
		b.order.MoveToFront(el)
		return
	}
	if b.order.Len() >= b.max {
		if last := b.order.Back(); last != nil {
			delete(b.byKey, last.Value.(*boundedEntry[K, V]).key)
			b.order.Remove(last)
		}
	}
	b.byKey[key] = b.order.PushFront(&boundedEntry[K, V]{key: key, val: val})
}

// getOrMake returns the value of key, made with build (under no lock: build
// may be slow, and two callers may make it at once; the last one kept wins)
// when absent.
func (b *bounded[K, V]) getOrMake(key K, build func() (V, error)) (V, error) {
	if v, ok := b.get(key); ok {
		return v, nil
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	b.put(key, v)
	return v, nil
}

// len is the number of entries.
func (b *bounded[K, V]) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.order.Len()
}
