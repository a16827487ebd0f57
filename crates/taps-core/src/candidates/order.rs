//! Race order of candidates: CIB failures last, then score and stack, then addresses
//! (recent successes fastest first, unknown ones in RFC 6724 order), interleaving
//! address families (RFC 8305 First Address Family Count).

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
    cands.sort_by(|a, b| {
        (class(a) == 2)
            .cmp(&(class(b) == 2))
            .then(b.score.total_cmp(&a.score))
            .then(a.stack.index().cmp(&b.stack.index()))
            .then(
                a.local
                    .as_ref()
                    .map(|l| &l.interface)
                    .cmp(&b.local.as_ref().map(|l| &l.interface)),
            )
            .then(class(a).cmp(&class(b)))
            .then(rtt(a).cmp(&rtt(b)))
            .then(rfc6724::sort_key(&a.remote.ip()).cmp(&rfc6724::sort_key(&b.remote.ip())))
    });
    // Interleave families within each run of equal group and class.
    let same_run = |a: &Candidate, b: &Candidate| {
        (class(a) == 2) == (class(b) == 2)
            && a.score == b.score
            && a.stack == b.stack
            && a.local.as_ref().map(|l| &l.interface) == b.local.as_ref().map(|l| &l.interface)
            && class(a) == class(b)
    };
    let mut start = 0;
    while start < cands.len() {
        let mut end = start + 1;
        while end < cands.len() && same_run(&cands[start], &cands[end]) {
            end += 1;
        }
        interleave(&mut cands[start..end], first_family_count);
        start = end;
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
