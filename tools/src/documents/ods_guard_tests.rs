use super::*;

/// A `content.xml` holding `sheets`, each a table body.
fn content(sheets: &[&str]) -> Vec<u8> {
    let tables: String = sheets
        .iter()
        .map(|body| format!("<table:table table:name=\"S\">{body}</table:table>"))
        .collect();
    format!(
        "<office:document-content xmlns:office=\"o\" xmlns:table=\"t\" xmlns:text=\"x\"><office:body><office:spreadsheet>{tables}</office:spreadsheet></office:body></office:document-content>"
    )
    .into_bytes()
}

const USED: &str =
    "<table:table-cell office:value-type=\"string\"><text:p>ab</text:p></table:table-cell>";

#[test]
fn a_plain_sheet_costs_its_cells_and_its_text() {
    let row = format!("<table:table-row>{USED}{USED}</table:table-row>");
    let cost = measure_ok(&content(&[&format!("{row}{row}{row}")]));
    assert_eq!(cost.cells, 6);
    assert_eq!(cost.text, 6 * 2);
}

#[test]
fn trailing_empty_rows_and_columns_cost_nothing() {
    // How office programs write a sheet's unused rest.
    let body = format!(
        "<table:table-row>{USED}<table:table-cell table:number-columns-repeated=\"16383\"/></table:table-row>\
         <table:table-row table:number-rows-repeated=\"1048575\"><table:table-cell table:number-columns-repeated=\"16384\"/></table:table-row>"
    );
    assert_eq!(measure_ok(&content(&[&body])).cells, 1);
}

#[test]
fn repeated_rows_and_columns_of_a_used_cell_count_every_copy() {
    let body = "<table:table-row table:number-rows-repeated=\"1000\"><table:table-cell office:value-type=\"string\" table:number-columns-repeated=\"10\"><text:p>abc</text:p></table:table-cell></table:table-row>";
    let cost = measure_ok(&content(&[body]));
    assert_eq!(cost.cells, 10_000);
    assert_eq!(cost.text, 30_000);
}

#[test]
fn repeats_are_capped_as_calamine_caps_them() {
    let body = "<table:table-row table:number-rows-repeated=\"99999999999\"><table:table-cell office:value-type=\"float\" table:number-columns-repeated=\"99999999999\"/></table:table-row>";
    assert_eq!(measure_ok(&content(&[body])).cells, MAX_ROWS * MAX_COLUMNS);
}

#[test]
fn far_apart_cells_cost_the_dense_range_between_them() {
    let body = format!(
        "<table:table-row>{USED}</table:table-row>\
         <table:table-row table:number-rows-repeated=\"998\"><table:table-cell/></table:table-row>\
         <table:table-row><table:table-cell table:number-columns-repeated=\"99\"/>{USED}</table:table-row>"
    );
    assert_eq!(measure_ok(&content(&[&body])).cells, 1000 * 100);
}

#[test]
fn sheets_add_up() {
    let row = format!("<table:table-row>{USED}</table:table-row>");
    assert_eq!(measure_ok(&content(&[&row, &row, &row])).cells, 3);
}

#[test]
fn xml_cut_inside_a_sheet_or_broken_is_refused() {
    // calamine would read the cut sheet until its end tag, forever.
    let whole = content(&[&format!("<table:table-row>{USED}</table:table-row>")]);
    let at = whole.windows(8).position(|w| w == b"</table:").unwrap();
    let err = measure(&whole[..at]).unwrap_err();
    assert!(err.contains("ends inside a sheet"), "{err}");
    let err = measure(b"<a><table:table></b>").unwrap_err();
    assert!(err.contains("not well-formed"), "{err}");
}

fn measure_ok(content: &[u8]) -> Cost {
    measure(content).unwrap()
}
