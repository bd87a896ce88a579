package operator

import (
	"testing"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// TestServiceAccountsSwitch checks how --service-accounts and the flags that
// imply it decide whether a watch's resources may name a ServiceAccount:
// off unless switched on, on with --default-service-account or
// --require-service-account, and a contradiction refused at the start.
func TestServiceAccountsSwitch(t *testing.T) {
	tests := []struct {
		name       string
		mode       string
		given      bool
		flags      Config
		allow, req bool
		wantErr    bool
	}{
		{name: "default: off", mode: ServiceAccountsOff},
		{name: "allowed", mode: ServiceAccountsAllowed, given: true, allow: true},
		{name: "required", mode: ServiceAccountsRequired, given: true, allow: true, req: true},
		{name: "--require-service-account implies it", mode: ServiceAccountsOff, flags: Config{RequireServiceAccount: true}, allow: true, req: true},
		{name: "--default-service-account implies it", mode: ServiceAccountsOff, flags: Config{DefaultServiceAccount: "deployer"}, allow: true},
		{name: "off given beside --default-service-account", mode: ServiceAccountsOff, given: true, flags: Config{DefaultServiceAccount: "deployer"}, wantErr: true},
		{name: "off given beside --require-service-account", mode: ServiceAccountsOff, given: true, flags: Config{RequireServiceAccount: true}, wantErr: true},
		{name: "not a mode", mode: "yes", given: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.flags
			c.MaxConcurrentReconciles = 1
			err := SetServiceAccounts(&c, tt.mode, tt.given)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error for %q beside %+v", tt.mode, tt.flags)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c, _, err = checkConfig(c)
			if err != nil {
				t.Fatal(err)
			}
			p := policyOf(watches.Watch{}, c)
			if p.Allow != tt.allow || p.Require != tt.req {
				t.Errorf("policy allows %v, requires %v; want %v, %v", p.Allow, p.Require, tt.allow, tt.req)
			}
		})
	}
}
