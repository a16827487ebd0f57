//! Race order of candidates: CIB failures last, then score and stack, then addresses
//! (recent successes fastest first, unknown ones in RFC 6724 order), interleaving
//! address families (RFC 8305 First Address Family Count) and, when candidates are bound
//! to local interfaces, the interfaces too: a dead link costs one attempt delay, not one
//! per address of it.

use super::candidate::Candidate;
use super::rfc6724;
use crate::policy::History;

/// Puts candidates in race order (see the module docs). Pure: the race calls it again
/// when new DNS answers add candidates. Cost: one sort, then one pass that interleaves
/// families in each run of equal candidates (cloning the candidates of runs of 3 or more).
pub fn order(cands: &mut [Candidate], first_family_count: usize) {
    let class = |c: &Candidate| match c.history {
        History::Succeeded { .. } => 0u8,
        History::Unknown => 1,
        History::Failed { .. } => 2,
    };
    let rtt = |c: &Candidate| match c.history {
        History::Succeeded { rtt, .. } => rtt,
        _ => Default::default(),
    };
    // `then_with`: each later key is computed only when the earlier ones tie.
    cands.sort_by(|a, b| {
        (class(a) == 2)
            .cmp(&(class(b) == 2))
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.stack.index().cmp(&b.stack.index()))
            .then_with(|| class(a).cmp(&class(b)))
            .then_with(|| rtt(a).cmp(&rtt(b)))
            .then_with(|| rfc6724::sort_key(&a.remote.ip()).cmp(&rfc6724::sort_key(&b.remote.ip())))
    });
    // Interleave families and interfaces within each run of equal group and class.
    let same_run = |a: &Candidate, b: &Candidate| {
        (class(a) == 2) == (class(b) == 2)
            && a.score == b.score
            && a.stack == b.stack
            && class(a) == class(b)
    };
    let mut start = 0;
    while start < cands.len() {
        let mut end = start + 1;
        while end < cands.len() && same_run(&cands[start], &cands[end]) {
            end += 1;
        }
        interleave_interfaces(&mut cands[start..end], first_family_count);
        start = end;
    }
}

/// The local interface a candidate is bound to (`None`: the OS routes).
fn interface(c: &Candidate) -> Option<&str> {
    c.local.as_ref().map(|l| &*l.interface)
}

/// Interleaves families within each interface's candidates, then takes the interfaces in
/// turn (in the order they first appear), each turn preferring the family the previous
/// candidate did not have: two links with both families start as link 1 IPv6, link 2
/// IPv4, link 1 IPv4, link 2 IPv6.
fn interleave_interfaces(run: &mut [Candidate], first_family_count: usize) {
    let first = interface(&run[0]);
    if run.iter().all(|c| interface(c) == first) {
        interleave(run, first_family_count);
        return;
    }
    let mut groups: Vec<std::collections::VecDeque<Candidate>> = Vec::new();
    let mut names: Vec<Option<&str>> = Vec::new();
    let mut owned: Vec<Vec<Candidate>> = Vec::new();
    for c in run.iter() {
        match names.iter().position(|n| *n == interface(c)) {
            Some(i) => owned[i].push(c.clone()),
            None => {
                names.push(interface(c));
                owned.push(vec![c.clone()]);
            }
        }
    }
    for mut g in owned {
        interleave(&mut g, first_family_count);
        groups.push(g.into());
    }
    let mut out: Vec<Candidate> = Vec::with_capacity(run.len());
    while out.len() < run.len() {
        for g in groups.iter_mut() {
            let last = out.last().map(Candidate::family);
            let pick = g.iter().position(|c| Some(c.family()) != last).unwrap_or(0);
            out.extend(g.remove(pick));
        }
    }
    for (slot, c) in run.iter_mut().zip(out) {
        *slot = c;
    }
}

/// RFC 8305 section 4: `first_family_count` of the first family, then alternate.
fn interleave(run: &mut [Candidate], first_family_count: usize) {
    if run.len() < 3 {
        return;
    }
    let first = run[0].family();
    let (a, b): (Vec<Candidate>, Vec<Candidate>) =
        run.iter().cloned().partition(|c| c.family() == first);
    let mut out = Vec::with_capacity(run.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    out.extend(a.by_ref().take(first_family_count));
    loop {
        let (y, x) = (b.next(), a.next());
        if x.is_none() && y.is_none() {
            break;
        }
        out.extend(y);
        out.extend(x);
    }
    for (slot, c) in run.iter_mut().zip(out) {
        *slot = c;
    }
}
