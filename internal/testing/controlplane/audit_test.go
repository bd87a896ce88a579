package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// An added user's requests appear in the audit log under its name, a create
// once, without the object's data.
func TestAuditLogAttributesRequestsToUsers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute) // includes a first build
	defer cancel()
	cp := start(t, ctx, Options{WorkDir: t.TempDir(), AuditLog: true})
	if cp.AuditLogPath == "" {
		t.Fatal("AuditLogPath is empty with AuditLog set")
	}

	const user = "audit-test-user"
	kubeconfig, _, err := cp.AddUser(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	// The requests below authenticate with the kubeconfig on disk.
	fromDisk, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("loading %s: %v", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(fromDisk)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "audited", Namespace: metav1.NamespaceDefault},
		Data:       map[string]string{"key": "not-in-the-audit-log"},
	}
	if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile(cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	var creates int
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Stage string `json:"stage"`
			Verb  string `json:"verb"`
			User  struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource, Name string
			} `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if ev.Stage != "ResponseComplete" && ev.Stage != "ResponseStarted" {
			t.Errorf("audit event at stage %q; the policy keeps ResponseStarted and ResponseComplete", ev.Stage)
		}
		if ev.User.Username == user && ev.Verb == "create" && ev.ObjectRef.Resource == "configmaps" && ev.ObjectRef.Name == "audited" {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("found %d audit events for %s creating configmap audited, want 1", creates, user)
	}
	if bytes.Contains(raw, []byte("not-in-the-audit-log")) {
		t.Error("the audit log holds the ConfigMap's data")
	}
}
