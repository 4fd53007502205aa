//! A reconciliation pass hands a trace context to the xDS pushes it causes only when a traced
//! change made it (a policy `PUT` on the Global, through KDS: `Store::note_trace`). With an
//! OpenTelemetry layer recording spans, an untraced pass runs inside the long-lived
//! `reconciler` task span; its pushes must not join that span's never-ending trace
//! ([`umbra_zone_cp::reconciler::Reconciler::push_trace`]).

use opentelemetry::trace::TracerProvider as _;
use tracing_subscriber::layer::SubscriberExt as _;
use umbra_core::resource::Resource;
use umbra_zone_cp::{reconciler, store};

#[test]
fn only_a_traced_pass_hands_its_context_to_the_pushes() {
    // A provider without an exporter still records spans with valid trace contexts, as the
    // zone's does when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    tracing::subscriber::with_default(subscriber, || {
        let store = store::Store::new();
        store
            .put(
                Resource::from_bytes(b"type: Mesh\nname: m\n").unwrap(),
                None,
            )
            .unwrap();
        let rec = reconciler::Reconciler::new(store.clone());
        let task = tracing::info_span!("reconciler", zone = "zone-1");
        task.in_scope(|| {
            assert!(
                !umbra_runtime::process::current_context().is_empty(),
                "the task span records a trace (else this test proves nothing)"
            );
            rec.reconcile_once();
            assert_eq!(
                rec.push_trace(),
                None,
                "an untraced pass joined the task's trace"
            );
        });
        // A traced change: the pass continues the remote trace and hands it on.
        let change = tracing::info_span!("global.put");
        let carrier = change.in_scope(umbra_runtime::process::current_context);
        let trace_id = |c: &umbra_runtime::process::TraceContext| {
            c["traceparent"].split('-').nth(1).unwrap().to_owned()
        };
        store.note_trace(carrier.clone());
        store
            .put(
                Resource::from_bytes(
                    b"type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web}\n",
                )
                .unwrap(),
                None,
            )
            .unwrap();
        task.in_scope(|| rec.reconcile_once());
        let pushed = rec
            .push_trace()
            .expect("a traced pass hands its context on");
        assert_eq!(trace_id(&pushed), trace_id(&carrier));
        // And the next untraced pass clears it again.
        task.in_scope(|| rec.reconcile_once());
        assert_eq!(rec.push_trace(), None);
    });
}
