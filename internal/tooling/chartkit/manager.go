package chartkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// managerFile holds the manager's Deployment, whose RELATED_IMAGE_*
// variables give the charts their images.
var managerFile = filepath.Join("config", "manager", "manager.yaml")

// writeManagerEnv makes the manager container's env hold exactly images among
// kind's RELATED_IMAGE variables: existing ones get their value, new ones go
// after the last RELATED_IMAGE_ variable (or at the end of env), stale ones of
// the kind go. The file is edited as lines: it is several documents with
// comments that must stay.
func writeManagerEnv(root, kind string, images []relatedImage) (bool, error) {
	path := filepath.Join(root, managerFile)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) && len(images) == 0 {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	lines := strings.SplitAfter(string(data), "\n")
	want := map[string]string{}
	for _, im := range images {
		want[im.Env] = im.Image
	}
	var out []string
	lastRelated, envEnd, indent := -1, -1, ""
	inEnv := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		if name, ok := strings.CutPrefix(t, "- name: "); ok && strings.HasPrefix(name, "RELATED_IMAGE_") {
			ind := l[:len(l)-len(strings.TrimLeft(l, " "))]
			hasValue := i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "value:")
			if ownsEnv(kind, name) {
				if v, ok := want[name]; ok {
					out = append(out, l, ind+"  value: "+v+"\n")
					delete(want, name)
					lastRelated = len(out)
				}
				if hasValue {
					i++
				}
				continue
			}
			out = append(out, l)
			if hasValue {
				out = append(out, lines[i+1])
				i++
			}
			lastRelated, indent = len(out), ind
			continue
		}
		if t == "env:" && strings.HasPrefix(l, "        ") {
			inEnv, indent = true, l[:len(l)-len(strings.TrimLeft(l, " "))]
		} else if inEnv && t != "" && !strings.HasPrefix(l, indent+"-") && !strings.HasPrefix(l, indent+" ") && !strings.HasPrefix(l, indent+"#") {
			inEnv, envEnd = false, len(out)
		}
		out = append(out, l)
	}
	var add []string
	for _, im := range images {
		if _, ok := want[im.Env]; ok {
			add = append(add, indent+"- name: "+im.Env+"\n", indent+"  value: "+im.Image+"\n")
		}
	}
	if len(add) > 0 {
		at := lastRelated
		if at < 0 {
			at = envEnd
		}
		if at < 0 {
			return false, fmt.Errorf("%s: no env list in the manager container to add %s to", managerFile, strings.TrimSpace(add[0]))
		}
		out = append(out[:at], append(add, out[at:]...)...)
	}
	return writeIfChanged(path, []byte(strings.Join(out, "")))
}

// ownsEnv tells whether a variable is one of kind's: RELATED_IMAGE_<KIND> or
// RELATED_IMAGE_<KIND>_<N>.
func ownsEnv(kind, name string) bool {
	prefix := "RELATED_IMAGE_" + envName(kind)
	if name == prefix {
		return true
	}
	n, ok := strings.CutPrefix(name, prefix+"_")
	if !ok || n == "" {
		return false
	}
	for _, r := range n {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
