//! Who may read `/metrics` when it is served securely, as upstream v0.18+ (controller-runtime's
//! `WithAuthenticationAndAuthorization` filter).
//!
//! A request needs `Authorization: Bearer <token>`; the token is checked with a TokenReview
//! (`authentication.k8s.io/v1`) and the reviewed user with a SubjectAccessReview
//! (`authorization.k8s.io/v1`, non-resource path `/metrics`, verb `get`). No token or a token the
//! API server does not authenticate: 401. Authenticated but not allowed: 403. Allowed: 200.
//!
//! The decision is pure ([`after_token_review`], [`after_access_review`], [`DecisionCache`]);
//! [`authorize`] is the thin I/O around it. Decisions are cached for [`CACHE_TTL`] under the
//! SHA-256 digest of the token, so that a Prometheus scraping every few seconds costs the API
//! server two reviews a minute, and the token itself is never kept in memory.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

/// How long a decision is reused before the token is reviewed again.
pub const CACHE_TTL: Duration = Duration::from_secs(60);

/// How many decisions the cache holds at most; bounds memory against a flood of distinct tokens.
pub const CACHE_CAPACITY: usize = 1_000;

/// The non-resource path the SubjectAccessReview asks about.
pub const METRICS_PATH: &str = "/metrics";

/// The verb the SubjectAccessReview asks about.
pub const METRICS_VERB: &str = "get";

/// What a request to `/metrics` is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Serve the metrics: 200.
    Allowed,
    /// No bearer token, or one the API server does not authenticate: 401.
    Unauthenticated,
    /// An authenticated user without `get` on `/metrics`: 403.
    Forbidden,
}

impl Decision {
    /// The HTTP status code of the decision.
    pub fn status_code(self) -> u16 {
        match self {
            Decision::Allowed => 200,
            Decision::Unauthenticated => 401,
            Decision::Forbidden => 403,
        }
    }
}

/// The user a TokenReview authenticated, as the SubjectAccessReview must name it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewedUser {
    /// The user name, e.g. `system:serviceaccount:monitoring:prometheus`.
    pub username: String,
    /// The user's UID.
    pub uid: Option<String>,
    /// The user's groups.
    pub groups: Vec<String>,
    /// Extra attributes the authenticator provided.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a TokenReview answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenReviewOutcome {
    /// The token belongs to this user.
    Authenticated(ReviewedUser),
    /// The token is unknown, expired or revoked.
    Unauthenticated,
}

/// What to do after the TokenReview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextStep {
    /// Answer now.
    Answer(Decision),
    /// Ask whether this user may `get` `/metrics`.
    ReviewAccess(ReviewedUser),
}

/// The bearer token of an `Authorization` header value, if it carries one.
///
/// The scheme is case-insensitive (RFC 7235); an empty token counts as none.
pub fn bearer_token(authorization: Option<&str>) -> Option<&str> {
    let value = authorization?.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// The step after a TokenReview.
pub fn after_token_review(outcome: TokenReviewOutcome) -> NextStep {
    match outcome {
        TokenReviewOutcome::Authenticated(user) => NextStep::ReviewAccess(user),
        TokenReviewOutcome::Unauthenticated => NextStep::Answer(Decision::Unauthenticated),
    }
}

/// The decision after a SubjectAccessReview.
pub fn after_access_review(allowed: bool) -> Decision {
    if allowed {
        Decision::Allowed
    } else {
        Decision::Forbidden
    }
}

/// The TokenReview to post for `token`.
pub fn token_review(token: &str) -> TokenReview {
    TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_owned()),
            ..TokenReviewSpec::default()
        },
        ..TokenReview::default()
    }
}

/// What the API server's TokenReview answer means.
pub fn token_review_outcome(review: &TokenReview) -> TokenReviewOutcome {
    let Some(status) = review.status.as_ref() else {
        return TokenReviewOutcome::Unauthenticated;
    };
    let authenticated_user = status
        .authenticated
        .unwrap_or(false)
        .then_some(status.user.as_ref())
        .flatten();
    match authenticated_user {
        Some(user) => TokenReviewOutcome::Authenticated(ReviewedUser {
            username: user.username.clone().unwrap_or_default(),
            uid: user.uid.clone(),
            groups: user.groups.clone().unwrap_or_default(),
            extra: user.extra.clone().unwrap_or_default(),
        }),
        None => TokenReviewOutcome::Unauthenticated,
    }
}

/// The SubjectAccessReview asking whether `user` may `get` `/metrics`.
pub fn access_review(user: &ReviewedUser) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.username.clone()),
            uid: user.uid.clone(),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(METRICS_PATH.to_owned()),
                verb: Some(METRICS_VERB.to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

/// Whether the API server's SubjectAccessReview answer allows the request.
pub fn access_review_allowed(review: &SubjectAccessReview) -> bool {
    review
        .status
        .as_ref()
        .is_some_and(|status| status.allowed && !status.denied.unwrap_or(false))
}

/// The SHA-256 digest of a token: the cache key, so that tokens are not kept in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenDigest([u8; 32]);

impl TokenDigest {
    /// The digest of `token`.
    pub fn of(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }
}

/// Decisions by token digest, each valid for `ttl`, at most `capacity` of them.
///
/// The clock is passed in so that the expiry and the bound are testable.
#[derive(Debug)]
pub struct DecisionCache {
    ttl: Duration,
    capacity: usize,
    entries: HashMap<TokenDigest, (Decision, Instant)>,
}

impl Default for DecisionCache {
    fn default() -> Self {
        Self::new(CACHE_TTL, CACHE_CAPACITY)
    }
}

impl DecisionCache {
    /// A cache keeping decisions for `ttl`, at most `capacity` of them.
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity,
            entries: HashMap::new(),
        }
    }

    /// The decision for `token`, if one was made less than the TTL before `now`.
    pub fn get(&self, token: &TokenDigest, now: Instant) -> Option<Decision> {
        let (decision, decided_at) = self.entries.get(token)?;
        (now.saturating_duration_since(*decided_at) < self.ttl).then_some(*decision)
    }

    /// Remembers `decision` for `token`, made at `now`.
    ///
    /// When full, expired entries go first; if none expired, the oldest decision goes.
    pub fn insert(&mut self, token: TokenDigest, decision: Decision, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        if !self.entries.contains_key(&token) && self.entries.len() >= self.capacity {
            let ttl = self.ttl;
            self.entries
                .retain(|_, (_, decided_at)| now.saturating_duration_since(*decided_at) < ttl);
            if self.entries.len() >= self.capacity {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, decided_at))| *decided_at)
                    .map(|(digest, _)| *digest);
                if let Some(oldest) = oldest {
                    self.entries.remove(&oldest);
                }
            }
        }
        self.entries.insert(token, (decision, now));
    }

    /// How many decisions are held, expired or not.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no decision is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A review could not be made; the request is answered 500 and not cached.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Posting the TokenReview failed.
    #[error(
        "failed to post a TokenReview (authentication.k8s.io/v1) for a /metrics request; check that the controller's ClusterRole grants create on tokenreviews"
    )]
    TokenReview(#[source] kube::Error),
    /// Posting the SubjectAccessReview failed.
    #[error(
        "failed to post a SubjectAccessReview (authorization.k8s.io/v1) for user {user} on /metrics; check that the controller's ClusterRole grants create on subjectaccessreviews"
    )]
    AccessReview {
        /// The reviewed user.
        user: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// The decision for a request with `authorization` as its `Authorization` header: from the cache
/// when fresh, otherwise by a TokenReview and a SubjectAccessReview with `client`.
pub async fn authorize(
    client: &kube::Client,
    cache: &std::sync::Mutex<DecisionCache>,
    authorization: Option<&str>,
) -> Result<Decision, ReviewError> {
    let Some(token) = bearer_token(authorization) else {
        return Ok(Decision::Unauthenticated);
    };
    let digest = TokenDigest::of(token);
    if let Some(decision) = lock(cache).get(&digest, Instant::now()) {
        return Ok(decision);
    }
    let reviewed = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &token_review(token))
        .await
        .map_err(ReviewError::TokenReview)?;
    let decision = match after_token_review(token_review_outcome(&reviewed)) {
        NextStep::Answer(decision) => decision,
        NextStep::ReviewAccess(user) => {
            let reviewed = Api::<SubjectAccessReview>::all(client.clone())
                .create(&PostParams::default(), &access_review(&user))
                .await
                .map_err(|source| ReviewError::AccessReview {
                    user: user.username.clone(),
                    source,
                })?;
            let decision = after_access_review(access_review_allowed(&reviewed));
            tracing::debug!(user = %user.username, ?decision, "reviewed a /metrics request");
            decision
        }
    };
    lock(cache).insert(digest, decision, Instant::now());
    Ok(decision)
}

/// The cache, also after a panic elsewhere while it was held: its entries stay consistent.
fn lock(cache: &std::sync::Mutex<DecisionCache>) -> std::sync::MutexGuard<'_, DecisionCache> {
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};
    use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;

    use super::*;

    fn user() -> ReviewedUser {
        ReviewedUser {
            username: "system:serviceaccount:monitoring:prometheus".into(),
            uid: Some("u-1".into()),
            groups: vec!["system:serviceaccounts".into()],
            extra: BTreeMap::from([("scopes".into(), vec!["a".into()])]),
        }
    }

    /// The whole decision for a header, a TokenReview answer and a SubjectAccessReview answer.
    fn decide(
        authorization: Option<&str>,
        token_review: TokenReviewOutcome,
        allowed: bool,
    ) -> Decision {
        if bearer_token(authorization).is_none() {
            return Decision::Unauthenticated;
        }
        match after_token_review(token_review) {
            NextStep::Answer(decision) => decision,
            NextStep::ReviewAccess(_) => after_access_review(allowed),
        }
    }

    #[test]
    fn decisions() {
        let authenticated = || TokenReviewOutcome::Authenticated(user());
        let cases = [
            (None, authenticated(), true, 401),
            (Some(""), authenticated(), true, 401),
            (Some("Basic dXNlcjpwYXNz"), authenticated(), true, 401),
            (Some("Bearer "), authenticated(), true, 401),
            (
                Some("Bearer t"),
                TokenReviewOutcome::Unauthenticated,
                true,
                401,
            ),
            (Some("Bearer t"), authenticated(), false, 403),
            (Some("Bearer t"), authenticated(), true, 200),
            (Some("bearer t"), authenticated(), true, 200),
        ];
        for (header, review, allowed, status) in cases {
            assert_eq!(
                decide(header, review.clone(), allowed).status_code(),
                status,
                "{header:?} {review:?} {allowed}"
            );
        }
    }

    #[test]
    fn bearer_token_is_the_value_after_the_scheme() {
        assert_eq!(bearer_token(Some("Bearer abc.def")), Some("abc.def"));
        assert_eq!(bearer_token(Some("  BEARER   abc ")), Some("abc"));
        assert_eq!(bearer_token(Some("Bearerabc")), None);
    }

    #[test]
    fn token_review_answers() {
        let answered = |authenticated: Option<bool>, user: Option<UserInfo>| TokenReview {
            status: Some(TokenReviewStatus {
                authenticated,
                user,
                ..TokenReviewStatus::default()
            }),
            ..TokenReview::default()
        };
        let info = UserInfo {
            username: Some(user().username),
            uid: user().uid,
            groups: Some(user().groups),
            extra: Some(user().extra),
        };
        assert_eq!(
            token_review_outcome(&answered(Some(true), Some(info.clone()))),
            TokenReviewOutcome::Authenticated(user())
        );
        assert_eq!(
            token_review_outcome(&answered(Some(false), Some(info))),
            TokenReviewOutcome::Unauthenticated
        );
        assert_eq!(
            token_review_outcome(&answered(None, None)),
            TokenReviewOutcome::Unauthenticated
        );
        assert_eq!(
            token_review_outcome(&TokenReview::default()),
            TokenReviewOutcome::Unauthenticated
        );
        assert_eq!(
            token_review("t").spec.token.as_deref(),
            Some("t"),
            "the token goes in the spec"
        );
    }

    #[test]
    fn access_review_asks_for_get_on_metrics_as_the_reviewed_user() {
        let spec = access_review(&user()).spec;
        assert_eq!(spec.user.as_deref(), Some(user().username.as_str()));
        assert_eq!(spec.uid, user().uid);
        assert_eq!(spec.groups, Some(user().groups));
        assert_eq!(spec.extra, Some(user().extra));
        assert_eq!(
            spec.non_resource_attributes,
            Some(NonResourceAttributes {
                path: Some("/metrics".into()),
                verb: Some("get".into()),
            })
        );
        assert!(spec.resource_attributes.is_none());
    }

    #[test]
    fn access_review_answers() {
        let answered = |allowed: bool, denied: Option<bool>| SubjectAccessReview {
            status: Some(SubjectAccessReviewStatus {
                allowed,
                denied,
                ..SubjectAccessReviewStatus::default()
            }),
            ..SubjectAccessReview::default()
        };
        assert!(access_review_allowed(&answered(true, None)));
        assert!(!access_review_allowed(&answered(false, None)));
        assert!(!access_review_allowed(&answered(true, Some(true))));
        assert!(!access_review_allowed(&SubjectAccessReview::default()));
    }

    #[test]
    fn cached_decisions_expire_after_the_ttl() {
        let start = Instant::now();
        let mut cache = DecisionCache::default();
        let token = TokenDigest::of("t");
        cache.insert(token, Decision::Forbidden, start);
        assert_eq!(cache.get(&token, start), Some(Decision::Forbidden));
        assert_eq!(
            cache.get(&token, start + Duration::from_secs(59)),
            Some(Decision::Forbidden)
        );
        assert_eq!(cache.get(&token, start + CACHE_TTL), None);
        assert_eq!(cache.get(&TokenDigest::of("other"), start), None);
    }

    #[test]
    fn the_cache_holds_at_most_its_capacity() {
        let start = Instant::now();
        let mut cache = DecisionCache::default();
        for i in 0..CACHE_CAPACITY {
            cache.insert(
                TokenDigest::of(&format!("t{i}")),
                Decision::Allowed,
                start + Duration::from_millis(i as u64),
            );
        }
        assert_eq!(cache.len(), CACHE_CAPACITY);
        let later = start + Duration::from_secs(1);
        cache.insert(TokenDigest::of("new"), Decision::Forbidden, later);
        assert_eq!(cache.len(), CACHE_CAPACITY);
        assert_eq!(
            cache.get(&TokenDigest::of("t0"), later),
            None,
            "oldest goes"
        );
        assert_eq!(
            cache.get(&TokenDigest::of("t1"), later),
            Some(Decision::Allowed)
        );
        assert_eq!(
            cache.get(&TokenDigest::of("new"), later),
            Some(Decision::Forbidden)
        );
        // Once all have expired, a new decision clears them instead of evicting one by one.
        let expired = start + CACHE_TTL + Duration::from_secs(2);
        cache.insert(TokenDigest::of("fresh"), Decision::Allowed, expired);
        assert_eq!(cache.len(), 1);
        // Re-deciding a held token does not evict another.
        let mut full = DecisionCache::new(CACHE_TTL, 2);
        full.insert(TokenDigest::of("a"), Decision::Allowed, start);
        full.insert(TokenDigest::of("b"), Decision::Allowed, start);
        full.insert(TokenDigest::of("a"), Decision::Forbidden, start);
        assert_eq!(full.len(), 2);
        assert_eq!(
            full.get(&TokenDigest::of("b"), start),
            Some(Decision::Allowed)
        );
    }
}
