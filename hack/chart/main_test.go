package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunRefusesBadInputInOneLine: the command's errors are one line each
// (main prints them after "chart: " and exits 1).
func TestRunRefusesBadInputInOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: chart add"},
		{[]string{"bump"}, `unknown command "bump"`},
		{[]string{"add", "--root", t.TempDir(), "--kind", "App"}, "no chart given"},
		{[]string{"add", "--root", t.TempDir(), "--chart", "oci://127.0.0.1:1/charts/app", "--kind", "App"}, "--chart-version is required"},
		{[]string{"remove", "--root", t.TempDir(), "--kind", "lower"}, `--kind "lower"`},
	} {
		var out, errs bytes.Buffer
		err := run(tc.args, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: err = %v, want one line with %q", tc.args, err, tc.want)
		}
	}
}
