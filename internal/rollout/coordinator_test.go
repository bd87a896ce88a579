package rollout

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Parallel reconciles asking at once get exactly the free slots, and the
// slots go to the first resources by name whatever the order they ask in.
func TestCoordinatorAdmitsAtomicallyInOrder(t *testing.T) {
	var rs []Resource
	for i := range 20 {
		rs = append(rs, res(fmt.Sprintf("r%02d", i), nil))
	}
	var mu sync.Mutex
	var events []string
	c := New(Config{Chart: newChart, Budget: Budget{MaxUnavailable: intstr.FromInt32(5), MaxFailures: 1},
		List: func() ([]Resource, error) { return rs, nil },
		Wake: func(types.NamespacedName) {},
		Event: func(k types.NamespacedName, _ bool, reason, _ string) {
			mu.Lock()
			events = append(events, reason)
			mu.Unlock()
		},
	})
	var wg sync.WaitGroup
	var admitted []string
	for i := 19; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, wait, err := c.Admit(key(fmt.Sprintf("r%02d", i)), "0.1.0")
			if err != nil {
				t.Error(err)
				return
			}
			if tk != nil {
				mu.Lock()
				admitted = append(admitted, fmt.Sprintf("r%02d", i))
				mu.Unlock()
			} else if wait == nil || wait.Halted || wait.Total != 20 {
				t.Errorf("r%02d waits with %+v", i, wait)
			}
		}()
	}
	wg.Wait()
	sort.Strings(admitted)
	if fmt.Sprint(admitted) != "[r00 r01 r02 r03 r04]" {
		t.Errorf("admitted %v, want r00..r04", admitted)
	}
	if len(events) != 1 || events[0] != "RolloutStarted" {
		t.Errorf("events %v, want one RolloutStarted", events)
	}
	// The same resource asking again (a second reconcile while it runs)
	// keeps its slot and takes no other.
	if tk, _, _ := c.Admit(key("r00"), "0.1.0"); tk == nil {
		t.Errorf("r00 lost its slot")
	}
	if tk, _, _ := c.Admit(key("r05"), "0.1.0"); tk != nil {
		t.Errorf("r05 admitted past maxUnavailable")
	}
	// An upgrade that never ran gives its slot back at once; r00 still
	// comes before r05.
	(&Ticket{c: c, key: key("r00")}).Done(false)
	if tk, _, _ := c.Admit(key("r05"), "0.1.0"); tk != nil {
		t.Errorf("r05 admitted before r00")
	}
	if tk, _, _ := c.Admit(key("r00"), "0.1.0"); tk == nil {
		t.Errorf("r00 not admitted to the slot it gave back")
	}
	// Once r00..r04 are upgraded and Ready in the caches, the next five go.
	for i := range 5 {
		(&Ticket{c: c, key: key(fmt.Sprintf("r%02d", i))}).Done(true)
		rs[i] = res(fmt.Sprintf("r%02d", i), onNew("deployed", true))
	}
	for i := 5; i < 10; i++ {
		if tk, _, _ := c.Admit(key(fmt.Sprintf("r%02d", i)), "0.1.0"); tk == nil {
			t.Errorf("r%02d not admitted once r00..r04 were Ready", i)
		}
	}
	if tk, _, _ := c.Admit(key("r10"), "0.1.0"); tk != nil {
		t.Errorf("r10 admitted past maxUnavailable")
	}
}
