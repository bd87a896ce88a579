package chartkit

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/helmapp/helm-app-operator/internal/tooling/chartrbac"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// Report is what Add or Remove did and what the author must check.
type Report struct {
	Removed      bool
	Names        kindNames
	Source       string
	ChartVersion string
	// Changed lists the files written or removed, relative to the root,
	// each prefixed "wrote " or "removed ".
	Changed []string
	// KeptSample is the existing sample an update left as it was.
	KeptSample string
	Images     []relatedImage
	Unmapped   []string
	Needs      *chartrbac.Needs
	SpecNotes  []string
	// BundledCRDs are the chart's CRDs that ship with the operator
	// (Options.CRDs CRDsBundle).
	BundledCRDs []string
}

// Print writes the report for a person.
func (r *Report) Print(w io.Writer) {
	k := r.Names
	gvk := fmt.Sprintf("%s (%s/%s)", k.Kind, k.Group, k.Version)
	if r.Removed {
		if len(r.Changed) == 0 {
			fmt.Fprintf(w, "Kind %s: nothing to remove, the project has none of its files.\n", k.Kind)
			return
		}
		fmt.Fprintf(w, "Removed kind %s and its chart %s.\n", gvk, k.Chart)
		printList(w, "Files", r.Changed)
		fmt.Fprintln(w, "\nNext: make manifests bundle (the OLM bundle still lists the kind until it is regenerated).")
		return
	}
	fmt.Fprintf(w, "Kind %s serves the chart %s %s from %s.\n", gvk, k.Chart, r.ChartVersion, r.Source)
	if len(r.Changed) == 0 {
		fmt.Fprintln(w, "Nothing changed: the project already has this kind from this chart.")
	} else {
		printList(w, "Files", r.Changed)
	}
	if r.KeptSample != "" {
		fmt.Fprintf(w, "\nKept %s as it is (an existing sample is the author's; remove it to get a new one).\n", r.KeptSample)
	}

	var imgs []string
	for _, im := range r.Images {
		imgs = append(imgs, fmt.Sprintf("%s=%s", im.Env, im.Image))
	}
	printList(w, "Images (the manager's variables in config/manager/manager.yaml; watches.yaml overrideValues pass them to the chart)", imgs)

	printList(w, fmt.Sprintf("CRDs of the chart's crds/ shipped with the operator (%s: installed by make install or OLM, upgraded with the operator; the watch skips crds/, the operator holds no right on CRDs)", k.chartCRDsDir()), r.BundledCRDs)

	printList(w, "Images not mapped to a RELATED_IMAGE variable (neither mirrored nor pinned to a digest; `make bundle` refuses a Deployment, StatefulSet, DaemonSet or Job image it does not list)", r.Unmapped)

	var check []string
	if n := r.Needs; n != nil {
		for _, u := range n.Unresolved {
			check = append(check, "kind not resolved to a resource (no RBAC rule written for it): "+u)
		}
		for _, note := range n.Notes {
			if len(r.BundledCRDs) > 0 && strings.Contains(note, "CRDS=bundle") {
				continue // done: they ship with the operator
			}
			check = append(check, note)
		}
	}
	for _, note := range r.SpecNotes {
		check = append(check, "CRD: "+note)
	}
	printList(w, "Check", check)
	if mode := installModes(r.Needs); mode != "" {
		fmt.Fprintf(w, "\nInstall modes: %s\n", mode)
	}

	fmt.Fprintln(w, "\nNext:")
	fmt.Fprintln(w, "  make manifests bundle   # regenerate the CRDs and the OLM bundle from these files")
	fmt.Fprintln(w, "  make demo               # run the operator on the samples on a local cluster")
}

// installModes says which OLM install modes the kind leaves the operator, and
// why, in one line ("" without discovery).
func installModes(n *chartrbac.Needs) string {
	if n == nil {
		return ""
	}
	cluster := clusterKinds(n)
	if shared := sharedObjects(n.Scope); len(shared) > 0 {
		return fmt.Sprintf("AllNamespaces only: its releases create objects outside their namespace whose names hold no {{namespace}} (%s), "+
			"which two installs of the operator would share; `make bundle` offers that mode only", strings.Join(shared, ", "))
	}
	if len(cluster) > 0 || len(n.Cluster) > 0 {
		what := "needs cluster-wide rules"
		if len(cluster) > 0 {
			what = "creates cluster-scoped objects (" + strings.Join(cluster, ", ") + ")"
		}
		return fmt.Sprintf("all; the chart %s, so the operator holds cluster-wide rules in every mode (the CSV's clusterPermissions)", what)
	}
	return "all; the chart creates objects in its release's namespace only"
}

// sharedObjects names the objects its scope lets a release create outside
// its namespace under a name that holds no {{namespace}}: two releases in two
// namespaces would make the same object.
func sharedObjects(s watches.Scope) []string {
	var out []string
	for _, r := range append(append([]watches.ScopeRule{}, s.ClusterScoped...), s.Namespaces...) {
		for _, name := range r.Names {
			if !strings.Contains(name, watches.NameNamespace) {
				out = append(out, r.Kind+" "+name)
			}
		}
	}
	if len(out) > 4 {
		out = append(out[:4], fmt.Sprintf("%d more", len(out)-4))
	}
	return out
}

// clusterKinds names the cluster-scoped kinds the chart creates (an
// unresolved kind's scope is unknown; it is reported as unresolved).
func clusterKinds(n *chartrbac.Needs) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range n.Kinds {
		if !k.Namespaced && k.Resource != "" && !seen[k.Kind] {
			seen[k.Kind] = true
			out = append(out, k.Kind)
		}
	}
	sort.Strings(out)
	return out
}

func printList(w io.Writer, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, it := range items {
		fmt.Fprintf(w, "  %s\n", it)
	}
}

// snapshot hashes the files the command may change: watches.yaml, PROJECT,
// config/ and helm-charts/.
func snapshot(root string) (map[string][32]byte, error) {
	out := map[string][32]byte{}
	add := func(p string) error {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = sha256.Sum256(data)
		return nil
	}
	for _, f := range []string{watchesFile, projectFile} {
		if err := add(filepath.Join(root, f)); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	for _, d := range []string{"config", chartsDir} {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
			if os.IsNotExist(err) {
				return nil
			}
			if err != nil || e.IsDir() {
				return err
			}
			return add(p)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// changedFiles lists what differs between two snapshots. Files of a
// vendored chart are summed up by their chart folder.
func changedFiles(before, after map[string][32]byte) []string {
	seen := map[string]bool{}
	var out []string
	note := func(verb, p string) {
		if parts := strings.SplitN(p, "/", 3); parts[0] == chartsDir && len(parts) == 3 {
			p = parts[0] + "/" + parts[1] + "/"
			if verb == "wrote" {
				verb = "vendored"
			}
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, verb+" "+p)
		}
	}
	paths := make([]string, 0, len(before)+len(after))
	for p := range before {
		paths = append(paths, p)
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, inB := before[p]
		a, inA := after[p]
		switch {
		case !inA:
			note("removed", p)
		case !inB || a != b:
			note("wrote", p)
		}
	}
	return out
}
