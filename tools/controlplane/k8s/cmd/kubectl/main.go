// Command kubectl is the upstream kubectl, built from the k8s.io/kubectl
// module that k8s.io/kubernetes pins in this directory's go.mod.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// kubectl prints its own errors; RunNoErrOutput only returns them so
	// CheckErr can choose the exit code, as upstream's main does.
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
