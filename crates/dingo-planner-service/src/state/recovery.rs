//! Rebuilding the state from the stored records after a (re)start.

use super::{Decl, Delivery, Group, State};
use crate::config::ServiceConfig;
use crate::keys::Keys;
use crate::metrics::Metrics;
use crate::records::{DeliveryState, Loaded, Phase, RecordError};
use crate::topology::MetaTopology;
use dingo_planner::{Planner, ReadLowerBound};
use dingo_planner_client::convert::{declaration_from_wire, parse_task};
use dingo_proto::planner as pb;
use dingo_types::DeclarationId;
use std::collections::{BTreeMap, BTreeSet, HashMap};

impl State {
    /// Rebuilds the state from what was stored: live declarations go back
    /// into the planner core under their ids with their delivered sets,
    /// sets whose blocks were deleted meanwhile are elided, and dispatch
    /// groups not yet dispatched are queued again (those whose time passed
    /// are due at once).
    pub(crate) fn restore(
        config: ServiceConfig,
        loaded: Loaded,
        topo: MetaTopology,
        now_ms: u64,
    ) -> Result<State, RecordError> {
        let bad = RecordError;
        let mut planner = Planner::new(config.planner_config());
        let mut requests: HashMap<u64, pb::DeclareRequest> = loaded.requests.into_iter().collect();
        let mut delivered_keys: HashMap<u64, Vec<u64>> = HashMap::new();
        for (_, rec, _) in &loaded.deliveries {
            let cb = rec.callback.as_ref().ok_or_else(|| bad("a delivery without its callback".into()))?;
            delivered_keys.entry(cb.declaration).or_default().extend(cb.sets.iter().map(|s| s.key));
        }
        let mut decls = BTreeMap::new();
        // Live declarations the read lower bound counts: (id, deadline).
        let mut bounded = Vec::new();
        for (id, rec) in loaded.decls {
            let phase = rec.phase()?;
            let task = parse_task(&rec.task).map_err(bad)?;
            let mut keys = Keys::Same;
            if phase == Phase::Live {
                let req = requests.remove(&id).ok_or_else(|| bad(format!("declaration {id} has no request")))?;
                let decl = declaration_from_wire(&req).map_err(|e| bad(format!("declaration {id}: {e}")))?;
                keys = Keys::of(&decl.read_sets);
                let wire = delivered_keys.remove(&id).unwrap_or_default();
                let core: Vec<u64> = wire
                    .iter()
                    .map(|&k| keys.to_core(k).ok_or_else(|| bad(format!("declaration {id} has no set {k}"))))
                    .collect::<Result<_, _>>()?;
                planner
                    .restore(&topo, DeclarationId(id), &decl, &core, rec.missed)
                    .map_err(|e| bad(format!("cannot restore declaration {id}: {e}")))?;
                if decl.sets_needed.is_none() && decl.bytes_needed.is_none() {
                    bounded.push((DeclarationId(id), rec.deadline_ms));
                }
            }
            planner.advance_ids(DeclarationId(id));
            let d = Decl {
                owner: rec.owner,
                task,
                deadline_ms: rec.deadline_ms,
                total_sets: rec.total_sets,
                sets_needed: rec.sets_needed,
                bytes_needed: rec.bytes_needed,
                created_ms: rec.created_ms,
                keys,
                phase,
                retired: phase != Phase::Live,
                missed: rec.missed,
                elided: rec.elided_sets,
                delivered_sets: if phase == Phase::Live { 0 } else { rec.delivered_sets },
                acked_sets: if phase == Phase::Live { 0 } else { rec.acked_sets },
                deliveries: BTreeSet::new(),
            };
            decls.insert(id, d);
        }
        planner.note_deleted(&topo, &topo.deleted());
        let mut deliveries = BTreeMap::new();
        let mut groups: BTreeMap<u64, Group> = loaded
            .groups
            .into_iter()
            .map(|(id, g)| (id, Group { at_ms: g.at_ms, pins: g.pins, deliveries: Vec::new() }))
            .collect();
        for (id, rec, state) in loaded.deliveries {
            let callback = rec.callback.ok_or_else(|| bad(format!("delivery {id} has no callback")))?;
            let sets = callback.sets.len() as u64;
            let d =
                decls.get_mut(&callback.declaration).ok_or_else(|| bad(format!("delivery {id} has no declaration")))?;
            d.deliveries.insert(id);
            if state >= DeliveryState::Dispatched {
                d.delivered_sets += sets;
            }
            if state == DeliveryState::Acked {
                d.acked_sets += sets;
            }
            if state == DeliveryState::Scheduled {
                groups
                    .get_mut(&rec.group)
                    .ok_or_else(|| bad(format!("delivery {id} has no group")))?
                    .deliveries
                    .push(id);
            }
            let streamed = state == DeliveryState::Dispatched;
            deliveries.insert(
                id,
                Delivery { owner: rec.owner, declaration: callback.declaration, callback, state, sets, streamed },
            );
        }
        let mut state = State {
            config,
            planner,
            topo,
            decls,
            deliveries,
            groups,
            next_delivery: loaded.next_delivery,
            next_group: loaded.next_group,
            budget_override: loaded.budget,
            subscribers: HashMap::new(),
            next_stream: 0,
            next_quantum_ms: now_ms,
            metrics: Metrics::default(),
            slowness: BTreeMap::new(),
            lower_bound: ReadLowerBound::new(super::bound::MAX_BOUND_BLOCKS),
        };
        for (id, deadline_ms) in bounded {
            state.bound_restored(id, deadline_ms, now_ms);
        }
        Ok(state)
    }
}
