package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// metricsAddress returns a free local address for the operator's metrics endpoint.
func metricsAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// showMetrics scrapes the operator's HTTPS metrics endpoint with curl as
// Prometheus would: first without a token (401), then with the token of a
// ServiceAccount bound to config/rbac's metrics-reader ClusterRole, printing
// the operator's own series.
func (d *demo) showMetrics(ctx context.Context) error {
	for _, args := range [][]string{
		{"create", "serviceaccount", "metrics-scraper"},
		{"apply", "-f", "config/rbac/metrics_reader_role.yaml"},
		{"create", "clusterrolebinding", "metrics-scraper", "--clusterrole=metrics-reader", "--serviceaccount=default:metrics-scraper"},
	} {
		if err := d.kubectl(ctx, args...); err != nil {
			return err
		}
	}
	fmt.Println("$ TOKEN=$(kubectl create token metrics-scraper)")
	token, err := d.cp.Kubectl(ctx, "create", "token", "metrics-scraper")
	if err != nil {
		return err
	}
	token = strings.TrimSpace(token)
	url := "https://" + d.metricsAddr + "/metrics"

	fmt.Println("Without a token (the certificate is self-signed, hence -k):")
	out, err := curl(ctx, token, "-sk", "-o", "/dev/null", "-w", "HTTP %{http_code}\\n", url)
	if err != nil {
		return err
	}
	fmt.Print(out)

	fmt.Println("With the metrics-scraper token (the operator's own series; histogram buckets left out):")
	out, err = curl(ctx, token, "-sk", "-H", "Authorization: Bearer $TOKEN", url)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "helmapp_") && !strings.Contains(line, "_bucket{") {
			fmt.Println(line)
		}
	}
	return nil
}

// curl runs curl with args, showing the command; $TOKEN in an argument is
// shown as is and replaced by token only when run.
func curl(ctx context.Context, token string, args ...string) (string, error) {
	shown := make([]string, len(args))
	run := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		switch {
		case strings.Contains(a, "$TOKEN"):
			shown[i] = `"` + a + `"`
		case strings.ContainsAny(a, " ${}"):
			shown[i] = "'" + a + "'"
		}
		run[i] = strings.ReplaceAll(a, "$TOKEN", token)
	}
	fmt.Printf("$ curl %s\n", strings.Join(shown, " "))
	out, err := exec.CommandContext(ctx, "curl", run...).Output()
	if err != nil {
		return "", fmt.Errorf("curl: %w", err)
	}
	return string(out), nil
}
