//! How the KDS client keeps reaching its Global: the connection's timings (connect timeout,
//! keepalives, how long its streams may take to come up), the reconnect backoff ([`Backoff`])
//! and the turn it takes through the Global's addresses ([`Rotation`]): the next address at
//! once when a session ends, the backoff once per round of failed attempts.

use std::time::Duration;

use rand::Rng as _;

/// How often the zone pings its connection to the Global (HTTP/2 PING) and how long it waits
/// for the answer before it drops the connection and reconnects (as the Global does, see
/// `umbra_global_cp::kds::KEEPALIVE_INTERVAL`).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);
/// First reconnect delay after a round of failed or ended sessions.
pub const RECONNECT_BASE: Duration = Duration::from_millis(200);
/// Longest reconnect delay (jittered to `[max/2, max]`). Short, so that a zone whose network
/// comes back reconnects within seconds (issue 35's target: every Envoy of a zone back from a
/// partition runs what was written meanwhile within 5 s of the link returning; with a 30 s
/// cap a 60 s partition took 26 s, see BENCHMARKS.md). A failed attempt costs the Global one
/// refused connection: at this cap, a thousand zones retrying cost it at most a thousand a
/// second (per address).
pub const RECONNECT_MAX: Duration = Duration::from_secs(2);
/// Longest a connection to the Global may take to open (per address tried). With
/// [`RECONNECT_MAX`] it bounds how late the first attempt after a partition can come: a SYN
/// unanswered during the partition is retried 1 s later, then the attempt gives up, then the
/// next starts within 2 s.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest the three KDS streams may take to come up once the connection is open: a Global
/// replica that accepts connections but does not answer (its database out of reach) is left
/// for the next address.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// A session whose streams stayed up this long was not a failed attempt: the round of
/// attempts starts again from it, so the next address is dialed at once when it ends (a
/// Global replica killed fails over without waiting). Shorter sessions count as failures, so
/// replicas that accept and then drop the zone cannot make it spin.
pub const STAYED_UP: Duration = Duration::from_secs(2);
/// A session whose streams stayed up this long ends the failure streak: the backoff starts
/// over from [`RECONNECT_BASE`].
pub const LASTED: Duration = Duration::from_secs(30);

/// Exponential backoff with jitter: attempt `n` waits a random time in
/// `[d/2, d]`, `d = min(max, base · 2^n)`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Starting at `base`, never above `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            attempt: 0,
        }
    }

    /// The next wait.
    pub fn next_delay(&mut self) -> Duration {
        let d = self
            .base
            .saturating_mul(1 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let half = d / 2;
        half + rand::thread_rng().gen_range(Duration::ZERO..=half)
    }

    /// Start over (after a session that worked).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The client's turn through `len` addresses: it dials them in order, moves to the next one
/// whenever a session ends or never comes up, and waits ([`Backoff`]) only once every address
/// has been tried in a row (a round). A session that stayed up ([`STAYED_UP`]) starts a new
/// round of which it was the first attempt: with one address every reconnect waits, as
/// before; with several, the first failover is immediate.
#[derive(Debug, Clone)]
pub struct Rotation {
    len: usize,
    current: usize,
    /// Attempts in the current round.
    tried: usize,
    backoff: Backoff,
}

impl Rotation {
    /// A turn through `len` addresses (at least one counts), starting at the first, waiting
    /// per `backoff` between rounds.
    pub fn new(len: usize, backoff: Backoff) -> Self {
        Rotation {
            len: len.max(1),
            current: 0,
            tried: 0,
            backoff,
        }
    }

    /// The index of the address to dial now.
    pub fn current(&self) -> usize {
        self.current
    }

    /// The session on the current address ended; `up_for` is how long its streams were all
    /// up (`None`: they never were). Moves to the next address and returns how long to wait
    /// before dialing it: `None` while the round has addresses left to try.
    pub fn ended(&mut self, up_for: Option<Duration>) -> Option<Duration> {
        let up_for = up_for.unwrap_or_default();
        if up_for >= LASTED {
            self.backoff.reset();
        }
        if up_for >= STAYED_UP {
            self.tried = 1;
        } else {
            self.tried += 1;
        }
        self.current = (self.current + 1) % self.len;
        if self.tried >= self.len {
            self.tried = 0;
            Some(self.backoff.next_delay())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let d0 = b.next_delay();
        assert!(d0 >= Duration::from_millis(50) && d0 <= Duration::from_millis(100));
        let d1 = b.next_delay();
        assert!(d1 >= Duration::from_millis(100) && d1 <= Duration::from_millis(200));
        for _ in 0..40 {
            assert!(b.next_delay() <= Duration::from_secs(2));
        }
        let late = b.next_delay();
        assert!(late >= Duration::from_secs(1), "{late:?}");
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    fn rotation(len: usize) -> Rotation {
        Rotation::new(
            len,
            Backoff::new(Duration::from_millis(100), Duration::from_secs(2)),
        )
    }

    /// `(address dialed, whether a wait followed)` for each of `outcomes`.
    fn walk(r: &mut Rotation, outcomes: &[Option<Duration>]) -> Vec<(usize, bool)> {
        outcomes
            .iter()
            .map(|up| {
                let at = r.current();
                (at, r.ended(*up).is_some())
            })
            .collect()
    }

    #[test]
    fn failed_attempts_go_round_the_addresses_and_wait_once_per_round() {
        let mut r = rotation(3);
        assert_eq!(
            walk(&mut r, &[None; 7]),
            [
                (0, false),
                (1, false),
                (2, true),
                (0, false),
                (1, false),
                (2, true),
                (0, false)
            ]
        );
    }

    #[test]
    fn a_session_that_stayed_up_fails_over_at_once() {
        let up = Some(STAYED_UP);
        let mut r = rotation(2);
        // 0 refuses, 1 serves a while and dies: 0 is dialed at once; it refuses too, so the
        // round (1, 0) is over and the client waits.
        assert_eq!(
            walk(&mut r, &[None, up, None, None, up, up, None]),
            [
                (0, false),
                (1, false),
                (0, true),
                (1, false),
                (0, false),
                (1, false),
                (0, true)
            ]
        );
        // A session that came up but did not stay up is a failed attempt.
        let mut r = rotation(2);
        let brief = Some(STAYED_UP / 4);
        assert_eq!(
            walk(&mut r, &[brief, brief, brief]),
            [(0, false), (1, true), (0, false)]
        );
    }

    #[test]
    fn one_address_waits_before_every_reconnect() {
        let mut r = rotation(1);
        for up in [None, Some(STAYED_UP), Some(LASTED), None] {
            assert_eq!(r.current(), 0);
            assert!(r.ended(up).is_some(), "{up:?}");
        }
        // Zero addresses is treated as one (never a division by zero).
        let mut r = rotation(0);
        assert!(r.ended(None).is_some());
        assert_eq!(r.current(), 0);
    }

    #[test]
    fn a_session_that_lasted_resets_the_backoff() {
        let mut r = rotation(1);
        for _ in 0..20 {
            r.ended(None);
        }
        let late = r.ended(None).expect("a wait");
        assert!(late >= Duration::from_secs(1), "{late:?}");
        let after = r.ended(Some(LASTED)).expect("a wait");
        assert!(after <= Duration::from_millis(100), "{after:?}");
        // Merely staying up does not reset it.
        for _ in 0..20 {
            r.ended(None);
        }
        let again = r.ended(Some(STAYED_UP)).expect("a wait");
        assert!(again >= Duration::from_secs(1), "{again:?}");
    }
}
