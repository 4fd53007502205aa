//! # umbra-core
//!
//! Umbra's pure core, shared by every binary: no async runtime, no IO.
//!
//! - [`codec`]: YAML/JSON bytes to documents, bounded against hostile input;
//! - [`convert`]: old-to-new policy conversion for the migration workflow;
//! - [`resource`]: Kuma's universal resource envelope and the typed specs
//!   ([`mesh`], [`dataplane`], [`policies`], [`old`]);
//! - [`k8s`]: Kuma's Kubernetes form (`apiVersion: kuma.io/v1alpha1`, `kind`, `metadata`,
//!   `spec`), decoded to and encoded from the same resources;
//! - [`validate`]: `{field, message}` violations with Kuma's field paths;
//! - [`target_ref`]: `targetRef` and its validation;
//! - [`duration`]: Go/Kuma durations (`21s`, `2h`, `500ms`);
//! - [`policy`]: the type-independent view of a targetRef policy (targetRef, from/to items);
//! - [`matching`]: which policies select a DPP, in Kuma's precedence, and their rules;
//! - [`rules`]: subset algebra, rule building (cliques, negations), `Rules::compute`;
//! - [`merge`]: JSON merge patch of `default`s with `append*` lists concatenated;
//! - [`view`]: Live/Shadow views (`kuma.io/effect: shadow`) and the old-vs-new rule;
//! - [`rollout`]: staged rollouts' narrowing, stage lists and gates from Envoy's counters;
//! - [`sample`]: the matching-only rollout sample tag selecting a share of DPPs;
//! - [`observed`]: observe mode's Envoy counters read back, and the `_observed` report;
//! - [`old_matching`]: source/destination selector matching of the old policies;
//! - [`dependencies`]: what a DPP's (or a ZoneIngress's) generated config depends on;
//! - [`zone_ingress`]: the ZoneIngress resource of multi-zone meshes;
//! - [`zone_egress`]: the ZoneEgress resource (zone-owned, synced zone → Global only);
//! - [`gateway`]: builtin gateways: the MeshGateway selecting a gateway DPP and its routes;
//! - [`gateway_old`]: the old connection policies on builtin gateways, per listener and backend;
//! - [`gateway_route`]: MeshGatewayRoute read into the MeshHTTPRoute model;
//! - [`gateway_rules`]: the targetRef policies applying to a builtin gateway, per listener;
//! - [`type_info`]: every resource type and what is known of it (names, REST path, display
//!   names, `to`/`from` levels, old/new pairing), generated from the one type list
//!   ([`policies`]' `for_each_type`);
//! - [`ungenerated`]: the non-policy resources Umbra stores but generates nothing from
//!   (ExternalService, gateways, VirtualOutbound, secrets).
//!
//! Everything here is deterministic and bounded: decoding has size/depth/node limits and rule
//! building has item and combination limits, so hostile input yields an error, never a panic
//! or unbounded work.

pub mod codec;
pub mod convert;
pub mod dataplane;
pub mod defaults;
pub mod dependencies;
pub mod duration;
pub mod external_service;
pub mod fields;
pub mod gateway;
pub mod gateway_old;
pub mod gateway_route;
pub mod gateway_rules;
pub mod go_net;
pub mod k8s;
pub mod matching;
pub mod merge;
pub mod mesh;
pub mod meta;
pub mod observed;
pub mod old;
pub mod old_matching;
pub mod policies;
pub mod policy;
pub mod resource;
pub mod rollout;
pub mod rules;
pub mod sample;
pub mod target_ref;
pub mod type_info;
pub mod ungenerated;
pub mod validate;
pub mod view;
pub mod vips;
pub mod zone_egress;
pub mod zone_ingress;
