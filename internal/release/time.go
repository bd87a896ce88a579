package release

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metaTime drops sub-second precision, which the API server would drop anyway;
// keeping it would make every status write look like a change.
func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second).UTC()) }
