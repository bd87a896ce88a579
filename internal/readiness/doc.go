// Package readiness tells whether the objects a chart created are ready. It
// lists the objects of a release from its manifest (ObjectsFromManifest), reads
// each one and computes its kstatus (Check), and summarizes the results into
// what the status reports as ResourcesReady and status.resources (Summarize).
//
// Readiness is kstatus's (sigs.k8s.io/cli-utils/pkg/kstatus/status), with its
// rules:
//
//   - Built-in kinds with rules of their own (Deployment, StatefulSet,
//     DaemonSet, ReplicaSet, Pod, Service, PersistentVolumeClaim, Job, CRD, ...)
//     are judged by their status fields. ConfigMap, Secret, CronJob and
//     PodDisruptionBudget are always Current.
//   - Any object whose status.observedGeneration differs from
//     metadata.generation is InProgress; one being deleted is Terminating; one
//     with Reconciling=True is InProgress and one with Stalled=True is Failed.
//   - Kinds kstatus has no rules for (ServiceAccount, Role, Ingress, custom
//     resources, ...) are judged by a Ready condition when they have one
//     (True: Current; False or Unknown: InProgress), and are otherwise Current
//     ("Resource is current"): a kind kstatus does not know counts as ready once
//     it exists.
//
// Rules of our own (kinds.go) judge the kinds kstatus calls Current though
// they may not work: a Service with a selector needs a ready endpoint in its
// EndpointSlices; a webhook configuration, each webhook's Service, a ready
// endpoint and a caBundle; a LoadBalancer Service or an Ingress, an address
// (a warning, Result.Advisory, unless Checker.RequireAddresses). An advisory
// object that is not Current is reported in Summary.Warnings, not counted.
//
// kstatus's messages for workloads are terse ("Available: 1/3"); Check replaces
// them for Deployments, StatefulSets and DaemonSets with one line of their own
// ("1/3 replicas available") and, when a workload is not Current, appends why
// its first pod that cannot be scheduled is pending (PodHints).
//
// Summarize is pure and is where the condition's reason and message are
// decided; nothing here writes status.
package readiness
