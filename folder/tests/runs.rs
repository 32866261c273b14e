//! `StreamFolder::push_run` folds exactly what pushing the same points one by one folds: same
//! pieces, same counts, whatever the stream's state when the run arrives (its own run of
//! another step, demoted label components, a new slice, points out of order).
use folder::{FoldOptions, StreamFolder};

/// One message of a stream: a single point, or a run of points along the innermost dim.
#[derive(Clone, Debug)]
enum Msg {
    Point(Vec<i64>, Vec<i64>),
    Run(Vec<i64>, Vec<i64>, i64, Vec<i64>, u64),
}

fn expand(m: &Msg) -> Vec<(Vec<i64>, Vec<i64>)> {
    match m {
        Msg::Point(p, l) => vec![(p.clone(), l.clone())],
        Msg::Run(p, l, sigma, delta, n) => (0..*n as i64)
            .map(|k| {
                let mut p = p.clone();
                if let Some(t) = p.last_mut() {
                    *t += k * sigma;
                }
                let l = l.iter().zip(delta).map(|(v, dv)| v + k * dv).collect();
                (p, l)
            })
            .collect(),
    }
}

fn both(msgs: &[Msg], d: usize, l: usize, opts: &FoldOptions) {
    let mut runs = StreamFolder::new(d, l, opts);
    let mut one = StreamFolder::new(d, l, opts);
    for m in msgs {
        match m {
            Msg::Point(p, lab) => runs.push(p, lab),
            Msg::Run(p, lab, sigma, delta, n) => runs.push_run(p, lab, *sigma, delta, *n),
        }
        for (p, lab) in expand(m) {
            one.push(&p, &lab);
        }
        assert_eq!(runs.points(), one.points(), "{m:?}");
        assert_eq!(runs.last_point(), one.last_point(), "{m:?}");
    }
    assert_eq!(runs.finish(), one.finish(), "{msgs:?}");
}

/// A dependence's stream as the second pass sends it: per outer iteration, the first instance
/// alone, then the rest of the inner loop as one run; `noisy` labels break the affine pattern
/// now and then (to demote them), `gap` leaves holes between runs.
fn dep_stream(rng: &mut fastrand::Rng, d: usize, l: usize, noisy: bool, gap: bool) -> Vec<Msg> {
    let mut msgs = Vec::new();
    let outer = rng.u64(1..6);
    for o in 0..outer as i64 {
        let mut t = rng.i64(0..3);
        for _ in 0..rng.usize(1..4) {
            let sigma = if rng.u8(0..4) == 0 { 2 } else { 1 };
            let mut p = vec![o; d];
            p[d - 1] = t;
            let lab: Vec<i64> = (0..l)
                .map(|c| {
                    if noisy && c == 0 {
                        rng.i64(-50..50)
                    } else {
                        3 * o + t * c as i64
                    }
                })
                .collect();
            msgs.push(Msg::Point(p.clone(), lab.clone()));
            let n = rng.u64(0..40);
            p[d - 1] = t + sigma;
            let delta: Vec<i64> = (0..l).map(|c| sigma * c as i64).collect();
            let mut lab2 = lab.clone();
            for (v, dv) in lab2.iter_mut().zip(&delta) {
                *v += dv;
            }
            if noisy {
                lab2[0] = rng.i64(-50..50);
            }
            if n > 0 {
                msgs.push(Msg::Run(p, lab2, sigma, delta, n));
            }
            t += sigma * (n as i64 + 1) + if gap { rng.i64(1..5) } else { 0 };
        }
    }
    msgs
}

#[test]
fn runs_fold_as_their_points() {
    let mut rng = fastrand::Rng::with_seed(7);
    let opts = FoldOptions::default();
    for case in 0..400 {
        let d = 1 + case % 3;
        let l = case % 4;
        let noisy = l > 0 && case % 5 == 0;
        let gap = case % 3 == 0;
        let msgs = dep_stream(&mut rng, d, l, noisy, gap);
        both(&msgs, d, l, &opts);
    }
}

#[test]
fn a_run_of_another_step_than_the_streams_run() {
    let opts = FoldOptions::default();
    // The stream's run steps by 2; the run that follows steps by 1, then by 3.
    let msgs = vec![
        Msg::Point(vec![0, 0], vec![0]),
        Msg::Point(vec![0, 2], vec![4]),
        Msg::Run(vec![0, 4], vec![8], 1, vec![2], 5),
        Msg::Run(vec![0, 9], vec![18], 3, vec![6], 4),
        Msg::Run(vec![1, 0], vec![0], 1, vec![2], 10),
    ];
    both(&msgs, 2, 1, &opts);
}

#[test]
fn runs_out_of_order_and_malformed() {
    let opts = FoldOptions::default();
    let msgs = vec![
        Msg::Run(vec![2, 5], vec![1, 1], 1, vec![0, 1], 6),
        // Before the last point: out of order, as its pushes would be.
        Msg::Run(vec![2, 3], vec![1, 1], 1, vec![0, 1], 3),
        Msg::Run(vec![2, 20], vec![1, 1], -1, vec![0, 1], 3),
        Msg::Run(vec![3, 0], vec![1, 1], 1, vec![0, 1], 0),
    ];
    both(&msgs, 2, 2, &opts);
    // Wrong lengths are rejected point by point; zero dims repeat the point.
    let mut f = StreamFolder::new(2, 1, &opts);
    f.push_run(&[1], &[0], 1, &[0], 4);
    assert_eq!(f.finish().rejected, 4);
    both(&[Msg::Run(vec![], vec![5], 1, vec![1], 3)], 0, 1, &opts);
    // Near i64's end: the points past it are rejected.
    let mut f = StreamFolder::new(1, 0, &opts);
    f.push_run(&[i64::MAX - 2], &[], 1, &[], 5);
    let f = f.finish();
    assert_eq!((f.points, f.rejected), (3, 2));
}

#[test]
fn a_long_run_folds_in_constant_time() {
    // 2^40 points would take hours one by one.
    let mut f = StreamFolder::new(2, 1, &FoldOptions::default());
    f.push_run(&[0, 0], &[7], 1, &[8], 1 << 40);
    f.push_run(&[1, 0], &[7], 1, &[8], 1 << 40);
    let f = f.finish();
    assert_eq!(f.points, 1 << 41);
    assert!(f.is_exact());
    assert_eq!(f.pieces.len(), 1);
}
