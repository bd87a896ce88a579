package status

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DeepCopy returns a copy of s that shares no memory with it.
func (s *Status) DeepCopy() *Status {
	if s == nil {
		return nil
	}
	out := *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	if s.DeployedRelease != nil {
		d := *s.DeployedRelease
		if d.FirstDeployed != nil {
			d.FirstDeployed = d.FirstDeployed.DeepCopy()
		}
		if d.LastDeployed != nil {
			d.LastDeployed = d.LastDeployed.DeepCopy()
		}
		out.DeployedRelease = &d
	}
	if s.Resources != nil {
		r := *s.Resources
		r.NotReady = append([]NotReadyObject(nil), s.Resources.NotReady...)
		r.Warnings = append([]NotReadyObject(nil), s.Resources.Warnings...)
		out.Resources = &r
	}
	if s.FailedRelease != nil {
		f := *s.FailedRelease
		out.FailedRelease = &f
	}
	if s.LastTestRun != nil {
		out.LastTestRun = s.LastTestRun.DeepCopy()
	}
	if s.Drift != nil {
		out.Drift = s.Drift.DeepCopy()
	}
	if s.ValuesSources != nil {
		out.ValuesSources = append([]ValuesSource(nil), s.ValuesSources...)
	}
	out.History = copyHistory(s.History)
	return &out
}

// DeepCopy returns a copy of t that shares no memory with it.
func (t *TestRun) DeepCopy() *TestRun {
	out := *t
	out.StartedAt = *t.StartedAt.DeepCopy()
	out.CompletedAt = t.CompletedAt.DeepCopy()
	out.Hooks = make([]TestHook, len(t.Hooks))
	for i, h := range t.Hooks {
		h.StartedAt, h.CompletedAt = h.StartedAt.DeepCopy(), h.CompletedAt.DeepCopy()
		out.Hooks[i] = h
	}
	if t.Hooks == nil {
		out.Hooks = nil
	}
	return &out
}

// DeepCopy returns a copy of d that shares no memory with it.
func (d *Drift) DeepCopy() *Drift {
	out := *d
	out.DetectedAt = *d.DetectedAt.DeepCopy()
	out.Objects = nil
	for _, o := range d.Objects {
		fields := make([]DriftedField, len(o.Fields))
		for i, f := range o.Fields {
			f.Time = f.Time.DeepCopy()
			fields[i] = f
		}
		if o.Fields == nil {
			fields = nil
		}
		o.Fields = fields
		out.Objects = append(out.Objects, o)
	}
	return &out
}
