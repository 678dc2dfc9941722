//! JUnit XML read back as a CI system reads it, with an XML parser (quick-xml): each suite's
//! name, time, declared test count, and the test cases and failures it holds.

/// A `<testsuite>` as CI reads it: its attributes and how many cases and failures it holds.
#[derive(Debug)]
pub struct JunitSuite {
    pub name: String,
    pub time_s: f64,
    pub tests: usize,
    pub cases: usize,
    pub failures: usize,
}

/// The suites of a JUnit file, read with an XML parser (attributes unescaped).
pub fn suites(xml: &str) -> Vec<JunitSuite> {
    use quick_xml::events::Event;
    use quick_xml::XmlVersion;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut suites: Vec<JunitSuite> = Vec::new();
    loop {
        let event = reader.read_event().expect("well-formed XML");
        let element = match &event {
            Event::Start(e) | Event::Empty(e) => e.clone(),
            Event::Eof => return suites,
            _ => continue,
        };
        let attr = |key: &str| {
            element.try_get_attribute(key).unwrap().map(|a| {
                a.normalized_value(XmlVersion::Implicit1_0)
                    .unwrap()
                    .into_owned()
            })
        };
        match element.name().as_ref() {
            b"testsuite" => suites.push(JunitSuite {
                name: attr("name").unwrap(),
                time_s: attr("time").expect("a time").parse().unwrap(),
                tests: attr("tests").unwrap().parse().unwrap(),
                cases: 0,
                failures: 0,
            }),
            b"testcase" => suites.last_mut().unwrap().cases += 1,
            b"failure" => suites.last_mut().unwrap().failures += 1,
            _ => {}
        }
    }
}
