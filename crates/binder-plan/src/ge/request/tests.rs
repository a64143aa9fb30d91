use super::*;

#[test]
fn ocs_switches() {
    let r = Request::parse(
        "-bunit ES -bamount 2 -btype host -bsort Sc -bstart S -bstop s -binstance env",
    )
    .unwrap();
    let Strategy::Packed(p) = &r.strategy else {
        panic!()
    };
    assert_eq!(
        p.unit,
        UnitSpec {
            level: Letter::S,
            kind: Kind::Efficiency
        }
    );
    assert_eq!(p.amount, Amount::Exactly(2));
    assert!(p.host);
    assert_eq!(p.sort.len(), 2);
    assert_eq!(
        p.start,
        Some(Mark {
            letter: Letter::S,
            used: false
        })
    );
    assert_eq!(
        p.stop,
        Some(Mark {
            letter: Letter::S,
            used: true
        })
    );
    assert_eq!(r.instance, Instance::Env);
    for (w, level, kind) in [
        ("CT", Letter::T, Kind::Performance),
        ("T", Letter::T, Kind::Performance),
        ("ET", Letter::T, Kind::Efficiency),
        ("E", Letter::C, Kind::Efficiency),
        ("CY", Letter::Y, Kind::Performance),
    ] {
        assert_eq!(UnitSpec::parse(w), Some(UnitSpec { level, kind }), "{w}");
        assert_eq!(
            UnitSpec::parse(&UnitSpec::parse(w).unwrap().name()),
            UnitSpec::parse(w)
        );
    }
}

#[test]
fn sge_strategies() {
    let r = Request::parse("-binding env linear:4").unwrap();
    assert_eq!(
        r.strategy,
        Strategy::Linear {
            amount: 4,
            start: None
        }
    );
    assert_eq!(r.instance, Instance::Env);
    let r = Request::parse("-binding striding:2:2:0,1").unwrap();
    assert_eq!(
        r.strategy,
        Strategy::Striding {
            amount: 2,
            step: 2,
            start: Some((0, 1))
        }
    );
    let r = Request::parse("-binding pe explicit:0,0:1,3").unwrap();
    assert_eq!(r.strategy, Strategy::Explicit(vec![(0, 0), (1, 3)]));
}

#[test]
fn refusals_say_what_to_write() {
    for (text, why) in [
        ("-bunit Q", "not a unit"),
        ("-bunt C", "did you mean `-bunit`"),
        ("-bamount", "needs a value"),
        ("-bamount two", "not a whole number"),
        ("-bsort Ss", "both ways"),
        ("-bstart SC", "one letter"),
        ("-binding linear:2 -bunit C", "two languages"),
        ("-binding explicit:0,0:0,0", "twice"),
        ("-binding striding:2:0", "at least 1"),
        ("-bunit C -bunit T", "twice"),
        ("", "no switches"),
    ] {
        let e = Request::parse(text).unwrap_err().to_string();
        assert!(e.contains(why), "{text}: {e}");
    }
}
