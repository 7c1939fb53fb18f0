//! What the simulated task clients do: subscribe (again), go away, declare
//! (also nonsense), work through their callbacks and acknowledge them late,
//! twice, or with deliveries they were never given, cancel, delete blocks
//! and move copies (announcing it first, or not), repair lost copies, and
//! crash.

use super::{Job, Request, Sim};
use crate::Violation;
use crate::oracle::DeclInfo;
use crate::world::{QUANTUM_MS, START_MS};
use dingo_planner_service::{may_be_stale, refresh_first};
use dingo_types::{BlockId, ChunkRef, Member, MemberBitmap, ReadSets};

impl Sim<'_> {
    /// A random client does something; with the planner down, only what
    /// needs no planner.
    pub(super) fn client_act(&mut self, planner_up: bool) -> Result<(), Violation> {
        let c = self.rng.usize(0..self.clients.len());
        let roll = self.rng.u32(0..100);
        if !planner_up {
            match roll {
                0..50 => self.take_inbox(c),
                50..53 => self.crash_client(c),
                53..55 => self.delete_block(false),
                55..57 => self.write_block(),
                57..59 => self.move_copy(false),
                59..61 => self.repair_copy(),
                _ => {
                    let ms = self.rng.u64(1..=200);
                    self.advance(ms)
                }
            }
            return Ok(());
        }
        match roll {
            0..12 => self.subscribe(c, false),
            12..15 => {
                self.disconnect(c);
                Ok(())
            }
            15..28 => self.declare(c, true),
            28..31 => self.declare(c, false),
            31..48 => {
                self.take_inbox(c);
                Ok(())
            }
            48..72 => self.ack(c, false),
            72..78 => self.ack(c, true),
            78..82 => self.cancel(c, false),
            82..84 => self.cancel(c, true),
            84..86 => {
                self.crash_client(c);
                Ok(())
            }
            86..88 => self.subscribe(c, true),
            88..90 => {
                self.delete_block(true);
                Ok(())
            }
            90..92 => {
                self.write_block();
                Ok(())
            }
            92..94 => {
                self.move_copy(true);
                Ok(())
            }
            94..95 => {
                self.repair_copy();
                Ok(())
            }
            _ => {
                {
                    let ms = self.rng.u64(1..=50);
                    self.advance(ms)
                };
                Ok(())
            }
        }
    }

    /// Opens a stream unless the client has one (or `again`: replaces it).
    pub(super) fn subscribe(&mut self, c: usize, again: bool) -> Result<(), Violation> {
        if self.clients[c].stream.is_some() && !again {
            return Ok(());
        }
        let name = self.clients[c].name.clone();
        let p = self.process();
        let (stream, step) = p.machine.subscribe(&name);
        p.streams.insert(stream, c);
        self.clients[c].stream = Some(stream);
        self.note(|| format!("{name} subscribes: stream {stream}"));
        self.queue(step, Request::Subscribe { client: c, stream });
        Ok(())
    }

    fn disconnect(&mut self, c: usize) {
        if let Some(stream) = self.clients[c].stream.take() {
            self.process().queue.push_back(Job::Closed(stream));
            let name = &self.clients[c].name;
            self.trace.push(format!("{} {name} hangs up stream {stream}", self.step));
        }
    }

    fn crash_client(&mut self, c: usize) {
        let stream = self.clients[c].crash();
        if let (Some(stream), Some(p)) = (stream, self.planner.as_mut()) {
            p.queue.push_back(Job::Closed(stream));
        }
        self.summary.counts.client_crashes += 1;
        let name = self.clients[c].name.clone();
        self.note(|| format!("{name} crashes"));
    }

    pub(super) fn take_inbox(&mut self, c: usize) {
        let rng = &mut self.rng;
        let late = || if rng.u8(0..3) == 0 { 0 } else { rng.u64(0..=3 * QUANTUM_MS) };
        self.clients[c].take_inbox(self.now_ms, late);
    }

    /// Declares as the service does: a disk scrub on a fresh topology, and
    /// a declaration refused for a reason a stale topology could cause
    /// (`dingo_planner_service::may_be_stale`) once more after a refresh.
    /// With the metadata service unreachable the call fails instead.
    fn declare(&mut self, c: usize, valid: bool) -> Result<(), Violation> {
        let owner = self.clients[c].name.clone();
        let now = self.now_ms;
        let (mut decl, mut keys) = if valid {
            let d = self.world.valid_declaration(&mut self.rng, now);
            (d.decl, Some(d.keys))
        } else {
            (self.world.invalid_declaration(&mut self.rng, now), None)
        };
        let mut refreshed = refresh_first(&decl);
        if refreshed {
            if !self.refresh_for_declare() {
                return Ok(());
            }
            if let (ReadSets::ChunksOnDisk(disk), Some(keys)) = (&decl.read_sets, keys.as_mut()) {
                *keys = self.world.disk_chunk_keys(disk.0);
                if keys.is_empty() {
                    return Ok(());
                }
                decl.sets_needed = decl.sets_needed.map(|n| n.min(keys.len() as u64));
            }
        }
        let mut accepted = self.request("declare", |m| m.declare(&owner, &decl, now))?;
        if let Err(e) = &accepted
            && !refreshed
            && may_be_stale(e)
        {
            if !self.refresh_for_declare() {
                return Ok(());
            }
            refreshed = true;
            self.summary.counts.stale_retries += 1;
            self.note(|| "declaration retried on a refreshed topology".into());
            accepted = self.request("declare", |m| m.declare(&owner, &decl, now))?;
        }
        let retried = if refreshed { " (on a refreshed topology)" } else { "" };
        match (accepted, keys) {
            (Ok((id, step)), Some(keys)) => {
                let needed = decl.sets_needed.unwrap_or(keys.len() as u64);
                let info = DeclInfo { owner, keys, needed, deadline_ms: decl.deadline.as_millis(), cancelled: None };
                self.summary.counts.declarations += 1;
                self.note(|| format!("declaration {} accepted: {needed} sets needed", id.0));
                self.queue(step, Request::Declare { client: c, id: id.0, info });
                Ok(())
            }
            (Ok((id, _)), None) => Err(self.violation(format!("nonsense accepted as declaration {}: {decl:?}", id.0))),
            (Err(e), Some(_)) => {
                Err(self.violation(format!("a valid declaration was refused{retried} ({e}): {decl:?}")))
            }
            (Err(_), None) => Ok(()),
        }
    }

    /// The service reads the metadata service for a declaration; false if
    /// it is unreachable (the call fails).
    fn refresh_for_declare(&mut self) -> bool {
        if self.world.meta_down_until.is_some() {
            self.note(|| "declaration failed: the metadata service is unreachable".into());
            return false;
        }
        self.refresh_planner();
        true
    }

    /// Acknowledges what the client has finished, maybe with its unsure
    /// acks again, a duplicate, an ack it already made, or (`bogus`) a
    /// delivery it was never given.
    pub(super) fn ack(&mut self, c: usize, bogus: bool) -> Result<(), Violation> {
        let now = self.now_ms;
        let client = &self.clients[c];
        let mut ids = client.ackable(now);
        if self.rng.bool() {
            ids.extend(client.unsure.iter().copied());
        }
        if !ids.is_empty() && self.rng.u8(0..10) == 0 {
            ids.push(ids[self.rng.usize(0..ids.len())]);
        }
        if !client.acked.is_empty() && self.rng.u8(0..10) == 0 {
            ids.push(client.acked[self.rng.usize(0..client.acked.len())]);
        }
        let given = ids.len();
        if bogus {
            ids.push(match self.rng.u8(0..3) {
                0 => 0,
                1 => u64::MAX / 2,
                _ => self.rng.u64(1..=self.summary.counts.deliveries_seen + 5),
            });
        }
        if ids.is_empty() {
            return Ok(());
        }
        let name = client.name.clone();
        let ids_ref = &ids;
        match self.request("ack", |m| m.ack(&name, ids_ref))? {
            Ok(step) => {
                let client = &mut self.clients[c];
                client.held.retain(|(d, _)| !ids.contains(d));
                for &d in &ids[..given] {
                    if !client.unsure.contains(&d) {
                        client.unsure.push(d);
                    }
                }
                self.summary.counts.acks += 1;
                self.note(|| format!("{name} acks {ids:?}"));
                self.queue(step, Request::Ack { client: c, ids });
                Ok(())
            }
            Err(e) if !bogus => {
                Err(self.violation(format!("{name}'s ack of deliveries it was given was refused: {e}")))
            }
            Err(_) => Ok(()),
        }
    }

    /// A task (garbage collection, transcoding) deletes a live block, at
    /// most half of them over the run; with the planner up, it may announce
    /// the deletion first and make it up to two quanta later.
    fn delete_block(&mut self, planner_up: bool) {
        let live = self.world.live_blocks();
        if live.len() * 2 <= self.world.blocks.len() {
            return;
        }
        let block = live[self.rng.usize(0..live.len())];
        self.oracle.deleting(block);
        self.summary.counts.blocks_deleted += 1;
        if planner_up && self.rng.bool() {
            let at = self.now_ms + self.rng.u64(0..=2 * QUANTUM_MS);
            self.world.announced.insert(block, at);
            self.announce(Member::Any(BlockId(block)));
        } else {
            self.world.delete(block);
            self.note(|| format!("block {block} deleted"));
        }
    }

    /// A task's `AnnounceDeletions` of `member`: the planner elides at once
    /// every set it covers.
    fn announce(&mut self, member: Member) {
        let members: MemberBitmap = [member].into_iter().collect();
        let (elided, step) = self.process().machine.announce_deletions(&members);
        self.summary.counts.announced_elided_sets += elided;
        self.note(|| format!("{member} announced for deletion: {elided} sets elided"));
        self.queue(step, Request::Announce { member });
    }

    /// A rebalancer moves a copy of a live block to a disk holding neither
    /// copy; with the planner up, it may announce the copy it moves away
    /// (a per-copy announcement) and move it up to two quanta later.
    fn move_copy(&mut self, planner_up: bool) {
        let Some((block, copy)) = self.world.movable_copy(&mut self.rng) else { return };
        let to = self.world.free_disk_for(&mut self.rng, block);
        self.summary.counts.copies_moved += 1;
        if planner_up && self.rng.bool() {
            let at = self.now_ms + self.rng.u64(0..=2 * QUANTUM_MS);
            self.world.moving.insert((block, copy), (to, at));
            self.oracle.moving_copy(block, copy);
            self.note(|| format!("copy {copy} of block {block} moves to disk {to} at +{}ms", at - START_MS));
            self.announce(Member::Copy(ChunkRef { block: BlockId(block), copy }));
        } else {
            self.world.place_copy((block, copy), to);
            self.note(|| format!("copy {copy} of block {block} moved to disk {to}"));
        }
    }

    /// Reconstruction writes a lost copy again, on a disk holding neither
    /// copy; the planner sees it at its next read of the metadata service.
    pub(super) fn repair_copy(&mut self) {
        let lost = self.world.lost_copies();
        if lost.is_empty() {
            return;
        }
        let (block, copy) = lost[self.rng.usize(0..lost.len())];
        let to = self.world.free_disk_for(&mut self.rng, block);
        self.world.place_copy((block, copy), to);
        self.note(|| format!("copy {copy} of block {block} repaired on disk {to}"));
    }

    /// A task writes a new block; the planner sees it at its next read of
    /// the metadata service.
    fn write_block(&mut self) {
        let block = self.world.write_block(&mut self.rng);
        self.summary.counts.blocks_written += 1;
        self.note(|| format!("block {block} written"));
    }

    fn cancel(&mut self, c: usize, bogus: bool) -> Result<(), Violation> {
        let client = &self.clients[c];
        let id = match (bogus, client.decls.is_empty()) {
            (true, _) => self.rng.u64(0..=self.summary.counts.declarations + 2),
            (false, true) => return Ok(()),
            (false, false) => client.decls[self.rng.usize(0..client.decls.len())],
        };
        let name = client.name.clone();
        if let Ok((_, step)) = self.request("cancel", |m| m.cancel(&name, id))? {
            self.note(|| format!("{name} cancels declaration {id}"));
            self.queue(step, Request::Cancel { client: c, id });
        }
        Ok(())
    }
}
