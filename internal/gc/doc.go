// Package gc is the orphan sweep: it deletes config revisions (ConfigMaps and Secrets
// labelled configmap-attacher.io/revision=true) that nothing uses and nothing owns, and
// repairs revisions that are used but not attached.
//
// The work is split in three parts:
//
//   - a Source reads one namespace into a Snapshot: revision metadata (metadata-only
//     lists: no ConfigMap or Secret data is ever held in memory), every object with a
//     pod template or pod spec, and the UIDs of live objects of the kinds it listed;
//   - the pure planner, PlanNamespace, turns a Snapshot into a Plan that gives every
//     revision a Decision (delete, keep or repair) and the reason;
//   - the Executor carries a Plan out: deletes with metav1.Preconditions{UID,
//     ResourceVersion}, at most Executor.Parallel (DefaultParallel, 16) in flight and
//     all paced by the client's QPS limiter, records a Kubernetes Event and a Prometheus
//     metric per deletion, and repairs through core.Attacher. The Report lists the
//     plan's items in plan order whatever order the deletes finished in.
//
// A Sweeper ties them together: periodic sweeps (Run, leader-elected on a Lease when
// several replicas run), a sweep of one namespace on demand (SweepNamespace, Trigger).
//
// # Reading the cluster
//
// LiveSource lists each namespace from the apiserver at sweep time, every kind at once
// (planning takes the slowest list, not the sum); revisions come from metadata-only
// lists (k8s.io/client-go/metadata), so no ConfigMap or Secret data is ever in memory.
// The one-shot commands use it. CachedSource plans from synced informer caches (a Store:
// package cache's Cache) and sends no LIST in steady state; the service uses it. Either
// way, the Executor reads each candidate live right before its delete and keeps it
// unless it is the object planned and its owners are confirmed gone (docs/design.md,
// "The sweep from the caches").
//
// # Use from the serve command
//
//	sw, err := gc.NewSweeper(gc.Config{Cluster: name, Client: kc, Attacher: attacher,
//		Source:   gc.CachedSource{Store: caches, Live: gc.LiveSource{Client: kc, Dynamic: dc, Metadata: mc}},
//		Metadata: mc, // the live confirm before each delete
//		Recorder: recorder, Metrics: metrics, // gc.NewMetrics(prometheus.DefaultRegisterer)
//		Options:  gc.Options{MinAge: minAge, Keep: keep}, Interval: interval,
//		LeaderElection: &gc.LeaderElection{Namespace: podNamespace}})
//	go sw.Run(ctx)                    // periodic, leader only
//	sw.Trigger(ns)                    // after an attach in ns (TriggerDelay later, coalesced)
//	rep, err := sw.SweepNamespace(ctx, ns)       // trigger spec operation: gc
//	rep, err := sw.SweepNamespaceDryRun(ctx, ns) // ... with dryRun: true
//
// # Safety rule 7 (docs/design.md, "Safety rules")
//
// A revision is deleted only when all of these hold, checked in this order:
//
//  1. it carries the opt-in label configmap-attacher.io/revision=true and is not being
//     deleted already;
//  2. it has no configmap-attacher.io/skip=true annotation;
//  3. no listed object with a pod template or pod spec references it: ReplicaSet,
//     Deployment, Argo Rollout (the Deployment a Rollout's spec.workloadRef names is
//     listed as a Deployment), StatefulSet, DaemonSet, Job, CronJob (its jobTemplate)
//     and Pod, whatever their state; references are volumes (incl. projected), env,
//     envFrom of every container kind (core.PodSpecRefs) and the names listed in the
//     configmap-attacher.io/configmaps and /secrets annotations of the object and of
//     its pod template. A revision referenced by a live ReplicaSet that does not own it
//     is repaired (attached), never deleted;
//  4. it has no live owner: every ownerReference is resolved by UID against the objects
//     listed of the owner's kind; a UID not found there is dangling and counts as absent;
//     an owner of a kind the Source did not list counts as live (never delete on doubt);
//  5. it is older than the grace period (Options.MinAge);
//  6. it is not among the newest Options.Keep unreferenced revisions of its family;
//  7. the snapshot holds no doubt: a Rollout whose spec.workloadRef names a kind that
//     was not listed makes the whole namespace keep everything.
//
// # Families
//
// A revision's family is, in order: its configmap-attacher.io/family label; the name
// of the workload owning it (the controller of its first ReplicaSet owner when that
// ReplicaSet is live, else the ReplicaSet's name without its trailing pod-template-hash
// segment; the owner's name for other owner kinds); else its own name with a trailing
// hash suffix stripped (see StripHashSuffix). Families rank their unreferenced
// revisions newest first by creation time (name descending breaks ties); the first
// Keep of them are kept as rollback targets.
//
// # Defaults
//
// DefaultMinAge is one hour: a revision is usually created moments before the workload
// change that references it (kustomize/Helm apply order, an Argo CD sync wave, a
// pipeline step that applies config first); an hour is far longer than any sane
// apply-to-ReplicaSet delay, yet short enough that abandoned revisions do not pile up.
// DefaultKeep is 2: the current config plus one rollback target survive even after the
// old ReplicaSets were pruned by revisionHistoryLimit, so `kubectl rollout undo` or a
// re-sync of the previous Git commit still finds its ConfigMap.
//
// # The residual race
//
// A real sweep plans twice and deletes only what both plans delete (Confirm); each
// candidate is read live right before its delete, and the delete carries the UID and
// resourceVersion seen, so an object attached, relabelled,
// annotated or replaced in between is not deleted (the apiserver answers 409 and the
// sweep reports "changed meanwhile", to be retried next sweep). Before a delete, a
// plan older than Config.MaxPlanAge is taken again (the QPS limiter paces a long sweep
// over minutes otherwise). A brand-new workload that
// references an old, unattached revision between that listing and the delete does not
// change the revision itself and is not caught; the grace period and keep-N make that
// window matter only for revisions that nothing used for a long time.
package gc
